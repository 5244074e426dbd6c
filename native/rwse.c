/* structpos._native_rwse: random-walk return probabilities of many small graphs (RWSE), one pass.

   rwse(row, col, weight, eptr, ptr, out, K, symmetrize, max_nodes) -> int

   Graph g owns the packed edges eptr[g]..eptr[g+1]-1 (row/col: int64 node indices local to the
   graph, weight: float64 > 0) and the output rows ptr[g]..ptr[g+1]-1 of out ((rows, K) float64,
   C-contiguous). Graphs with more than max_nodes nodes are skipped (their rows are left as they
   are); the return value is the number of graphs done. For each graph:

     A      dense adjacency, duplicate edges summed, self-loops kept;
            symmetrize: A <- max(A, A^T), M = D^-1/2 A D^-1/2 (same diagonal powers as P)
            else:       M = P = D^-1 A (a row without out-edges stays zero)
     X_a  = M^a (a = 1..h, h = ceil(K/2)) by sparse-times-dense products (row i of M X is the
            sum over the non-zeros M_ij of M_ij X[j, :]), and, for a directed walk, the rows
            Y_b = (M^T)^b (b = 1..K-h) the same way;
     out[k-1] = [M^k]_ii: X_k[i, i] for k <= h, and for k = h + b the row dot product
            sum_m X_h[i, m] Y_b[i, m] (Y_b = X_b for symmetric M).

   Bounds: every edge index is checked against its graph's node count, every offset against the
   buffers' lengths, and the workspace (h + (K-h)) * n^2 doubles against a fixed limit. The GIL is
   released only around the arithmetic, which touches no Python object. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buffers.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(_MSC_VER) && !defined(restrict)
#define restrict __restrict
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* setup.py builds at -O2, which leaves the row updates unvectorised */
#endif

/* x86-64 Linux with GCC: an AVX2 clone of the row updates, picked at load time (no FMA, so both
   clones round alike: each entry is the same multiply and add in the same order) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

#define MAX_WORK_DOUBLES ((Py_ssize_t)1 << 24) /* 128 MiB of workspace at most */

/* CSR of the non-zeros of the dense n x n matrix M (row stride ld; transposed when trans). */
static void to_csr(const double *M, Py_ssize_t n, Py_ssize_t ld, int trans, Py_ssize_t *rp, Py_ssize_t *ci,
                   double *cv) {
    Py_ssize_t nz = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        rp[i] = nz;
        for (Py_ssize_t j = 0; j < n; j++) {
            double v = trans ? M[j * ld + i] : M[i * ld + j];
            if (v != 0.0) {
                ci[nz] = j;
                cv[nz++] = v;
            }
        }
    }
    rp[n] = nz;
}

/* dst = S src: S in CSR, src and dst n rows of stride ld (a multiple of 4; the padding columns of
   src are zero and stay zero in dst). */
CLONES static void csr_times(const Py_ssize_t *restrict rp, const Py_ssize_t *restrict ci, const double *restrict cv,
                             const double *restrict src, double *restrict dst, Py_ssize_t n, Py_ssize_t ld) {
    for (Py_ssize_t i = 0; i < n; i++) {
        double *restrict d = dst + i * ld;
        Py_ssize_t p = rp[i];
        if (p == rp[i + 1]) {
            memset(d, 0, (size_t)ld * sizeof(double));
            continue;
        }
        {
            const double v = cv[p];
            const double *restrict s = src + ci[p] * ld;
            for (Py_ssize_t m = 0; m < ld; m += 4) { /* = 0 + v s[m], exactly */
                d[m] = v * s[m];
                d[m + 1] = v * s[m + 1];
                d[m + 2] = v * s[m + 2];
                d[m + 3] = v * s[m + 3];
            }
        }
        for (p++; p < rp[i + 1]; p++) {
            const double v = cv[p];
            const double *restrict s = src + ci[p] * ld;
            for (Py_ssize_t m = 0; m < ld; m += 4) {
                d[m] += v * s[m];
                d[m + 1] += v * s[m + 1];
                d[m + 2] += v * s[m + 2];
                d[m + 3] += v * s[m + 3];
            }
        }
    }
}

/* sum_m x[m] y[m] over ld (a multiple of 4) entries in four interleaved partial sums (m mod 4),
   added pairwise at the end: a fixed order (the same result on every build) that does not wait
   on one running sum. */
CLONES static double dot(const double *restrict x, const double *restrict y, Py_ssize_t ld) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (Py_ssize_t m = 0; m < ld; m += 4) {
        s0 += x[m] * y[m];
        s1 += x[m + 1] * y[m + 1];
        s2 += x[m + 2] * y[m + 2];
        s3 += x[m + 3] * y[m + 3];
    }
    return (s0 + s1) + (s2 + s3);
}

/* One graph of n nodes; matrices are n rows of stride ld = n rounded up to 4 (zero padding).
   work holds (h + hb) * n * ld doubles (X_1..X_h, then Y_1..Y_hb when directed); ci/cv n*n
   entries, rp n+1, deg n. */
static void one_graph(const int64_t *row, const int64_t *col, const double *w, Py_ssize_t ne, Py_ssize_t n, Py_ssize_t K,
                      int sym, double *out, double *work, Py_ssize_t *rp, Py_ssize_t *ci, double *cv, double *deg) {
    const Py_ssize_t ld = (n + 3) & ~(Py_ssize_t)3, nn = n * ld, h = (K + 1) / 2, hb = K - h;
    double *M = work; /* X_1 */
    memset(M, 0, (size_t)nn * sizeof(double));
    for (Py_ssize_t e = 0; e < ne; e++) M[row[e] * ld + col[e]] += w[e];
    if (sym)
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = i + 1; j < n; j++) {
                double a = M[i * ld + j], b = M[j * ld + i], m = a > b ? a : b;
                M[i * ld + j] = M[j * ld + i] = m;
            }
    for (Py_ssize_t i = 0; i < n; i++) {
        double s = 0.0;
        for (Py_ssize_t j = 0; j < n; j++) s += M[i * ld + j];
        deg[i] = s;
    }
    if (sym) {
        for (Py_ssize_t i = 0; i < n; i++) deg[i] = deg[i] > 0 ? 1.0 / sqrt(deg[i]) : 0.0;
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = 0; j < n; j++) M[i * ld + j] = deg[i] * M[i * ld + j] * deg[j];
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            double d = deg[i] > 0 ? deg[i] : 1.0;
            for (Py_ssize_t j = 0; j < n; j++) M[i * ld + j] /= d;
        }
    }
    to_csr(M, n, ld, 0, rp, ci, cv);
    for (Py_ssize_t a = 1; a < h; a++) csr_times(rp, ci, cv, work + (a - 1) * nn, work + a * nn, n, ld);
    double *Y = sym ? work : work + h * nn; /* Y_b = (M^T)^b, b = 1..hb */
    if (!sym && hb > 0) {
        memset(Y, 0, (size_t)nn * sizeof(double));
        for (Py_ssize_t i = 0; i < n; i++)
            for (Py_ssize_t j = 0; j < n; j++) Y[i * ld + j] = M[j * ld + i];
        to_csr(M, n, ld, 1, rp, ci, cv);
        for (Py_ssize_t b = 1; b < hb; b++) csr_times(rp, ci, cv, Y + (b - 1) * nn, Y + b * nn, n, ld);
    }
    const double *Xh = work + (h - 1) * nn;
    for (Py_ssize_t i = 0; i < n; i++) {
        double *o = out + i * K;
        for (Py_ssize_t a = 0; a < h; a++) o[a] = work[a * nn + i * ld + i];
        for (Py_ssize_t b = 0; b < hb; b++) o[h + b] = dot(Xh + i * ld, Y + b * nn + i * ld, ld);
    }
}

static PyObject *rwse(PyObject *self, PyObject *args) {
    PyObject *o_row, *o_col, *o_w, *o_eptr, *o_ptr, *o_out;
    Py_ssize_t K, max_nodes;
    int sym;
    if (!PyArg_ParseTuple(args, "OOOOOOnpn", &o_row, &o_col, &o_w, &o_eptr, &o_ptr, &o_out, &K, &sym, &max_nodes))
        return NULL;
    Py_buffer b[6];
    PyObject *objs[6] = {o_row, o_col, o_w, o_eptr, o_ptr, o_out};
    static const BufferSpec spec[6] = {{"row", 'i', 0, -1}, {"col", 'i', 0, -1}, {"weight", 'd', 0, -1},
                                       {"eptr", 'i', 0, -1}, {"ptr", 'i', 0, -1}, {"out", 'd', 1, -1}};
    if (get_typed_buffers(6, objs, b, spec) < 0) return NULL;
    PyObject *result = NULL;
    const int64_t *row = b[0].buf, *col = b[1].buf, *eptr = b[3].buf, *ptr = b[4].buf;
    const double *w = b[2].buf;
    double *out = b[5].buf;
    const Py_ssize_t E = b[0].len / 8, nb = b[4].len / 8 - 1, rows_out = K > 0 ? b[5].len / 8 / K : 0;
    if (K < 1 || max_nodes < 0 || nb < 0 || b[1].len / 8 != E || b[2].len / 8 != E || b[3].len / 8 != nb + 1 ||
        b[5].len != rows_out * K * 8) {
        PyErr_SetString(PyExc_ValueError, "rwse: inconsistent buffer lengths or K < 1");
        goto done;
    }
    /* offsets: monotone, within the buffers; edges within their graph */
    Py_ssize_t nmax = 0;
    for (Py_ssize_t g = 0; g < nb; g++) {
        if (eptr[g] < 0 || eptr[g] > eptr[g + 1] || eptr[g + 1] > E || ptr[g] < 0 || ptr[g] > ptr[g + 1] ||
            ptr[g + 1] > rows_out) {
            PyErr_Format(PyExc_ValueError, "rwse: offsets of graph %zd out of range", g);
            goto done;
        }
        Py_ssize_t n = (Py_ssize_t)(ptr[g + 1] - ptr[g]);
        if (n > max_nodes) continue;
        for (int64_t e = eptr[g]; e < eptr[g + 1]; e++)
            if (row[e] < 0 || row[e] >= n || col[e] < 0 || col[e] >= n || !(w[e] >= 0.0)) {
                PyErr_Format(PyExc_ValueError, "rwse: graph %zd, edge %lld out of range", g, (long long)(e - eptr[g]));
                goto done;
            }
        if (n > nmax) nmax = n;
    }
    const Py_ssize_t h = (K + 1) / 2, mats = sym ? h : K; /* X_1..X_h (+ Y_1..Y_{K-h}) */
    if (nmax > 0 && (nmax > 46336 || mats > MAX_WORK_DOUBLES / (nmax * (nmax + 3)))) {
        PyErr_SetString(PyExc_MemoryError, "rwse: workspace above the native limit");
        goto done;
    }
    const Py_ssize_t nn = nmax * ((nmax + 3) & ~(Py_ssize_t)3); /* n rows of stride ld */
    double *work = malloc((size_t)(mats * nn + nn + 2 * nmax + 2) * sizeof(double));
    Py_ssize_t *ip = malloc((size_t)(nn + nmax + 2) * sizeof(Py_ssize_t));
    if (!work || !ip) {
        free(work);
        free(ip);
        PyErr_NoMemory();
        goto done;
    }
    double *cv = work + mats * nn, *deg = cv + nn;
    Py_ssize_t *ci = ip, *rp = ip + nn, done_count = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < nb; g++) {
        Py_ssize_t n = (Py_ssize_t)(ptr[g + 1] - ptr[g]);
        if (n > max_nodes) continue;
        done_count++;
        if (n == 0) continue;
        one_graph(row + eptr[g], col + eptr[g], w + eptr[g], (Py_ssize_t)(eptr[g + 1] - eptr[g]), n, K, sym,
                  out + ptr[g] * K, work, rp, ci, cv, deg);
    }
    Py_END_ALLOW_THREADS;
    free(work);
    free(ip);
    result = PyLong_FromSsize_t(done_count);
done:
    release_buffers(b, 6);
    return result;
}

static PyMethodDef methods[] = {
    {"rwse", rwse, METH_VARARGS,
     "rwse(row, col, weight, eptr, ptr, out, K, symmetrize, max_nodes) -> graphs done: [M^k]_ii into out."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_rwse", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_rwse(void) { return PyModule_Create(&module); }
