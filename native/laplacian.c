/* structpos._native_laplacian: the padded normalised Laplacians of one size group, in one pass.

   graphs(row, col, eptr, members, L, sentinel, iso) -> None  (below)

   L is a (G, S, S) float64 C-contiguous output and iso a (G,) int64 output. With A the group's
   zero-padded adjacencies (what run_dense_groups' np.bincount of the edges gives), this writes, for
   every graph, exactly what laplacian._laplacian_stack computes with numpy:

     A  <- max(A, A^T);  d_i = sum_j A_ij;  iso_i = d_i <= 0;  s_i = iso_i ? 0 : 1 / sqrt(d_i)
     L_ij = (A_ij * -s_i) * s_j  (i != j),  L_ii = iso_i ? sentinel : 1,  iso[g] = sum_i iso_i

   The degree is summed in row order; numpy sums pairwise, so the two agree bit for bit only when
   every partial sum is exact: the caller passes integer weights (unweighted graphs, duplicates
   summed), whose sums are exact in any order.

   The GIL is released around the arithmetic, which touches no Python object. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buffers.h"
#include <math.h>
#include <stdint.h>
#include <string.h>

static void one_graph(double *A, Py_ssize_t S, double sentinel, double *s, int64_t *iso_count) {
    for (Py_ssize_t i = 0; i < S; i++)
        for (Py_ssize_t j = i + 1; j < S; j++) {
            double a = A[i * S + j], b = A[j * S + i];
            double m = a > b ? a : b; /* np.maximum: NaN cannot occur (weights are checked finite) */
            A[i * S + j] = A[j * S + i] = m;
        }
    int64_t isolated = 0;
    for (Py_ssize_t i = 0; i < S; i++) {
        double d = 0.0;
        for (Py_ssize_t j = 0; j < S; j++) d += A[i * S + j];
        if (d <= 0) {
            s[i] = 0.0;
            isolated++;
        } else {
            s[i] = 1.0 / sqrt(d);
        }
    }
    for (Py_ssize_t i = 0; i < S; i++) {
        const double si = -s[i];
        double *row = A + i * S;
        for (Py_ssize_t j = 0; j < S; j++) row[j] = (row[j] * si) * s[j];
        row[i] = s[i] == 0.0 ? sentinel : 1.0;
    }
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
    double *s = NULL;
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
    for (Py_ssize_t g = 0; g < G; g++) {
        if (mem[g] < 0 || mem[g] >= B) {
            PyErr_Format(PyExc_ValueError, "graphs: member %zd out of range", g);
            goto done;
        }
        for (int64_t e = eptr[mem[g]]; e < eptr[mem[g] + 1]; e++)
            if (row[e] < 0 || row[e] >= S || col[e] < 0 || col[e] >= S) {
                PyErr_Format(PyExc_ValueError, "graphs: edge %lld leaves the %zd-node block", (long long)e, S);
                goto done;
            }
    }
    s = PyMem_Malloc((size_t)(S > 0 ? S : 1) * sizeof(double));
    if (!s) {
        PyErr_NoMemory();
        goto done;
    }
    double *L = b[4].buf;
    int64_t *iso = b[5].buf;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < G; g++) {
        double *A = L + g * S * S;
        memset(A, 0, (size_t)(S * S) * sizeof(double));
        for (int64_t e = eptr[mem[g]]; e < eptr[mem[g] + 1]; e++) A[row[e] * S + col[e]] += 1.0;
        one_graph(A, S, sentinel, s, iso + g);
    }
    Py_END_ALLOW_THREADS;
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_Free(s);
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
