/* structpos._native_laplacian: the padded normalised Laplacians of one size group, in one pass.

   graphs(row, col, eptr, members, L, sentinel, iso) -> None  (below)

   L is a (G, S, S) float64 C-contiguous output and iso a (G,) int64 output. With A the group's
   zero-padded adjacencies (what run_dense_groups' np.bincount of the edges gives), this writes, for
   every graph, exactly what laplacian._laplacian_stack computes with numpy:

     A  <- max(A, A^T);  d_i = sum_j A_ij;  iso_i = d_i <= 0;  s_i = iso_i ? 0 : 1 / sqrt(d_i)
     L_ij = (A_ij * -s_i) * s_j  (i != j),  L_ii = iso_i ? sentinel : 1,  iso[g] = sum_i iso_i

   A is symmetrised and the degrees summed along the graph's edges (each pair once, O(E), not
   O(S^2)); numpy sums each row pairwise, so the two agree bit for bit only when every partial sum
   is exact: the caller passes integer weights (unweighted graphs, duplicates summed), whose sums
   are exact in any order.

   The GIL is released around the arithmetic, which touches no Python object. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buffers.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The Laplacian of one graph in A (S, S), which holds its edge counts over -0.0 on entry (-0.0 + 1 is
   1); e0..e1 are its edges in row/col. Each unordered pair is visited once, from its first edge:
   m = max of the two counts (np.maximum), both entries negated to mark the pair done, m added to
   the two degrees and the pair kept in (pi, pj, pm). The pairs then get (m * -s_i) * s_j and
   (m * -s_j) * s_i, the diagonal 1 (or the sentinel); every other entry keeps -0.0, which is what
   (0 * -s_i) * s_j is for any s >= 0. O(E + S) after the fill, not O(S^2). */
static void one_graph(double *A, Py_ssize_t S, const int64_t *row, const int64_t *col, int64_t e0, int64_t e1,
                      double sentinel, double *s, int64_t *iso_count, int64_t *pi, int64_t *pj, double *pm) {
    for (Py_ssize_t i = 0; i < S; i++) s[i] = 0.0; /* s holds the degrees until the next loop */
    Py_ssize_t pairs = 0;
    for (int64_t e = e0; e < e1; e++) {
        const int64_t i = row[e], j = col[e];
        const double a = A[i * S + j], b = A[j * S + i];
        if (a < 0) continue; /* the pair is done (both entries negated) */
        const double m = a > b ? a : b; /* np.maximum: NaN cannot occur (weights are checked finite) */
        A[i * S + j] = A[j * S + i] = -m;
        s[i] += m;
        if (j != i) s[j] += m;
        pi[pairs] = i;
        pj[pairs] = j;
        pm[pairs++] = m;
    }
    int64_t isolated = 0;
    for (Py_ssize_t i = 0; i < S; i++) {
        const double d = s[i];
        if (d <= 0) {
            s[i] = 0.0;
            isolated++;
        } else {
            s[i] = 1.0 / sqrt(d);
        }
    }
    for (Py_ssize_t p = 0; p < pairs; p++) {
        const int64_t i = pi[p], j = pj[p];
        A[i * S + j] = (pm[p] * -s[i]) * s[j];
        A[j * S + i] = (pm[p] * -s[j]) * s[i];
    }
    for (Py_ssize_t i = 0; i < S; i++) A[i * S + i] = s[i] == 0.0 ? sentinel : 1.0;
    *iso_count = isolated;
}

/* graphs(row, col, eptr, members, L, sentinel, iso) -> None

   The Laplacians of the unweighted graphs members (G,) of a size group, read straight from the packed
   edges (row, col: int64, graph by graph; graph m's edges are eptr[m] .. eptr[m + 1]): the block of
   graph members[b] gets A[row[e], col[e]] += 1 in edge order, then the same normalisation, each
   block zeroed, filled and normalised while it is in cache. No flat index array, no sort.

   Bounds: eptr (B + 1,) must be non-decreasing inside 0..len(row), every member in 0..B-1 and every
   endpoint in 0..S-1, all checked before any write; one checked allocation. */
static PyObject *graphs(PyObject *self, PyObject *args) {
    PyObject *o_row, *o_col, *o_eptr, *o_mem, *o_L, *o_iso;
    double sentinel;
    if (!PyArg_ParseTuple(args, "OOOOOdO", &o_row, &o_col, &o_eptr, &o_mem, &o_L, &sentinel, &o_iso)) return NULL;
    Py_buffer b[6];
    PyObject *objs[6] = {o_row, o_col, o_eptr, o_mem, o_L, o_iso};
    static const BufferSpec spec[6] = {{"row", 'i', 0, 1},     {"col", 'i', 0, 1}, {"eptr", 'i', 0, 1},
                                       {"members", 'i', 0, 1}, {"L", 'd', 1, 3},   {"iso", 'i', 1, 1}};
    if (get_typed_buffers(6, objs, b, spec) < 0) return NULL;
    PyObject *result = NULL;
    double *s = NULL, *pm = NULL;
    int64_t *pi = NULL, *pj = NULL;
    const Py_ssize_t E = b[0].shape[0], B = b[2].shape[0] - 1, G = b[3].shape[0], S = b[4].shape[1];
    const int64_t *row = b[0].buf, *col = b[1].buf, *eptr = b[2].buf, *mem = b[3].buf;
    if (b[1].shape[0] != E || B < 0 || b[4].shape[0] != G || b[4].shape[2] != S || b[5].shape[0] != G) {
        PyErr_SetString(PyExc_ValueError,
                        "graphs: shapes of row (E,), col (E,), eptr (B+1,), members (G,), L (G, S, S) or iso (G,) "
                        "disagree");
        goto done;
    }
    for (Py_ssize_t m = 0; m <= B; m++)
        if (eptr[m] < (m ? eptr[m - 1] : 0) || eptr[m] > E) {
            PyErr_Format(PyExc_ValueError, "graphs: eptr[%zd] out of order or range", m);
            goto done;
        }
    int64_t most = 1; /* the most edges of a member: the room of the pair lists */
    for (Py_ssize_t g = 0; g < G; g++) {
        if (mem[g] < 0 || mem[g] >= B) {
            PyErr_Format(PyExc_ValueError, "graphs: member %zd out of range", g);
            goto done;
        }
        if (eptr[mem[g] + 1] - eptr[mem[g]] > most) most = eptr[mem[g] + 1] - eptr[mem[g]];
        for (int64_t e = eptr[mem[g]]; e < eptr[mem[g] + 1]; e++)
            if (row[e] < 0 || row[e] >= S || col[e] < 0 || col[e] >= S) {
                PyErr_Format(PyExc_ValueError, "graphs: edge %lld leaves the %zd-node block", (long long)e, S);
                goto done;
            }
    }
    s = PyMem_Malloc((size_t)(S > 0 ? S : 1) * sizeof(double));
    pi = PyMem_Malloc((size_t)most * sizeof(int64_t));
    pj = PyMem_Malloc((size_t)most * sizeof(int64_t));
    pm = PyMem_Malloc((size_t)most * sizeof(double));
    if (!s || !pi || !pj || !pm) {
        PyErr_NoMemory();
        goto done;
    }
    double *L = b[4].buf;
    int64_t *iso = b[5].buf;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < G; g++) {
        double *A = L + g * S * S;
        for (Py_ssize_t c = 0; c < S * S; c++) A[c] = -0.0;
        const int64_t e0 = eptr[mem[g]], e1 = eptr[mem[g] + 1];
        for (int64_t e = e0; e < e1; e++) A[row[e] * S + col[e]] += 1.0;
        one_graph(A, S, row, col, e0, e1, sentinel, s, iso + g, pi, pj, pm);
    }
    Py_END_ALLOW_THREADS;
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_Free(s);
    PyMem_Free(pi);
    PyMem_Free(pj);
    PyMem_Free(pm);
    release_buffers(b, 6);
    return result;
}

static PyMethodDef methods[] = {
    {"graphs", graphs, METH_VARARGS,
     "graphs(row, col, eptr, members, L, sentinel, iso): padded normalised Laplacians of unweighted graphs from the packed edges."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_laplacian", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_laplacian(void) { return PyModule_Create(&module); }
