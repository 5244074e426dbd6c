/* structpos._native_lapmodes: the kept, sign-fixed eigenvectors of one size group, in one pass.

   rows(U, c0, valid, factor, Vt) -> None
   place(U, c0, valid, factor, n, rowstart, Vt, pe) -> None  (rows() that also fills the batch output; below)

   U (G, S, S) float64 holds each graph's eigenvectors as columns; valid (G, k) float64 is 1 or 0
   per kept mode; Vt (G, k, S) float64 receives, for column c = c0 + r of graph g, exactly what
   laplacian._group_modes computes with numpy from x = U[g, :, c]:

     top = max_s |x_s| (NaN if any is NaN);  j = first s with |x_s| >= top * factor (0 if none)
     Vt[g, r, s] = ((x_s * sign) * valid[g, r]) + 0.0,  sign = x_j < 0 ? -1 : 1

   (canonical_sign_rows, then the mask, then +0.0 turning -0.0 into 0.0: every step is one
   IEEE operation, so the bytes are numpy's.)

   Bounds: shapes are checked against each other and 0 <= c0, c0 + k <= S before any read; no
   allocation. The GIL is released around the loop, which touches no Python object. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buffers.h"
#include <math.h>

static PyObject *rows(PyObject *self, PyObject *args) {
    PyObject *o_U, *o_valid, *o_Vt;
    Py_ssize_t c0;
    double factor;
    if (!PyArg_ParseTuple(args, "OnOdO", &o_U, &c0, &o_valid, &factor, &o_Vt)) return NULL;
    PyObject *objs[3] = {o_U, o_valid, o_Vt};
    static const BufferSpec spec[3] = {{"U", 'd', 0, 3}, {"valid", 'd', 0, 2}, {"Vt", 'd', 1, 3}};
    Py_buffer views[3];
    if (get_typed_buffers(3, objs, views, spec) < 0) return NULL;
    const Py_buffer *bu = &views[0], *bv = &views[1], *bt = &views[2];
    PyObject *result = NULL;
    const Py_ssize_t G = bu->shape[0], S = bu->shape[1], k = bt->shape[1];
    if (bu->shape[2] != S || bt->shape[0] != G || bt->shape[2] != S || bv->shape[0] != G || bv->shape[1] != k ||
        c0 < 0 || k < 1 || c0 > S - k) {
        PyErr_SetString(PyExc_ValueError, "rows: shapes of U (G, S, S), valid (G, k), Vt (G, k, S) or c0 disagree");
        goto done;
    }
    const double *U = bu->buf, *valid = bv->buf;
    double *Vt = bt->buf;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < G; g++)
        for (Py_ssize_t r = 0; r < k; r++) {
            const double *x = U + g * S * S + c0 + r; /* x[s * S] */
            double *out = Vt + (g * k + r) * S;
            double top = fabs(x[0]); /* S >= k >= 1 here */
            for (Py_ssize_t s = 1; s < S; s++) {
                const double m = fabs(x[s * S]);
                if (m > top || isnan(m)) top = m; /* a NaN stays: nothing compares greater */
            }
            const double thr = top * factor;
            Py_ssize_t j = 0;
            for (Py_ssize_t s = 0; s < S; s++)
                if (fabs(x[s * S]) >= thr) {
                    j = s;
                    break;
                }
            const double sign = x[j * S] < 0 ? -1.0 : 1.0, v = valid[g * k + r];
            for (Py_ssize_t s = 0; s < S; s++) out[s] = ((x[s * S] * sign) * v) + 0.0;
        }
    Py_END_ALLOW_THREADS;
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release_buffers(views, 3);
    return result;
}


/* place(U, c0, valid, factor, n, rowstart, Vt, pe) -> None

   rows() (the same Vt bytes) that also writes the kept entries straight into the batch output
   pe (P, k) float64: graph g's node s < n[g] goes to row rowstart[g] + s, column r (what
   ModeTable.put / scatter_rows do with Vt). U is read along its rows (the k kept columns of a
   node are adjacent), not down its columns.

   Bounds: shapes checked against each other, 0 <= c0 <= S - k, 0 <= n[g] <= S and
   0 <= rowstart[g] <= P - n[g] for every g before any write; one checked allocation of 4k
   doubles and k flags. The GIL is released around the loop, which touches no Python object. */
static PyObject *place(PyObject *self, PyObject *args) {
    PyObject *o_U, *o_valid, *o_n, *o_start, *o_Vt, *o_pe;
    Py_ssize_t c0;
    double factor;
    if (!PyArg_ParseTuple(args, "OnOdOOOO", &o_U, &c0, &o_valid, &factor, &o_n, &o_start, &o_Vt, &o_pe)) return NULL;
    Py_buffer b[6];
    PyObject *objs[6] = {o_U, o_valid, o_n, o_start, o_Vt, o_pe};
    static const BufferSpec spec[6] = {{"U", 'd', 0, 3}, {"valid", 'd', 0, 2}, {"n", 'i', 0, 1},
                                       {"rowstart", 'i', 0, 1}, {"Vt", 'd', 1, 3}, {"pe", 'd', 1, 2}};
    if (get_typed_buffers(6, objs, b, spec) < 0) return NULL;
    PyObject *result = NULL;
    double *work = NULL;
    char *found = NULL;
    const Py_ssize_t G = b[0].shape[0], S = b[0].shape[1], k = b[5].shape[1], P = b[5].shape[0];
    if (b[0].shape[2] != S || b[1].shape[0] != G || b[1].shape[1] != k || b[2].shape[0] != G || b[3].shape[0] != G ||
        b[4].shape[0] != G || b[4].shape[1] != k || b[4].shape[2] != S || c0 < 0 || k < 1 || c0 > S - k) {
        PyErr_SetString(PyExc_ValueError,
                        "place: shapes of U (G, S, S), valid (G, k), n (G,), rowstart (G,), Vt (G, k, S), pe (P, k) "
                        "or c0 disagree");
        goto done;
    }
    const long long *n = b[2].buf, *start = b[3].buf;
    for (Py_ssize_t g = 0; g < G; g++)
        if (n[g] < 0 || n[g] > S || start[g] < 0 || start[g] > P - n[g]) {
            PyErr_Format(PyExc_ValueError, "place: graph %zd's rows (n=%lld, start=%lld) fall outside pe or S", g,
                         n[g], start[g]);
            goto done;
        }
    work = PyMem_Malloc(sizeof(double) * 4 * (size_t)k);
    found = PyMem_Malloc((size_t)k);
    if (work == NULL || found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const double *U = b[0].buf, *valid = b[1].buf;
    double *Vt = b[4].buf, *pe = b[5].buf, *top = work, *thr = work + k, *sgn = work + 2 * k, *nan = work + 3 * k;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < G; g++) {
        const double *Ug = U + g * S * S + c0; /* Ug[s * S + r]: kept mode r at node s */
        const double *vg = valid + g * k;
        double *V = Vt + g * k * S;
        /* top[r] = max_s |x_s|, NaN if any is NaN (rows()'s loop, without its branch: the NaNs are
           counted in nan[r] and put back after) */
        for (Py_ssize_t r = 0; r < k; r++) {
            top[r] = 0.0;
            nan[r] = 0.0;
        }
        for (Py_ssize_t s = 0; s < S; s++)
            for (Py_ssize_t r = 0; r < k; r++) {
                const double m = fabs(Ug[s * S + r]);
                nan[r] += m != m;
                top[r] = m > top[r] ? m : top[r];
            }
        for (Py_ssize_t r = 0; r < k; r++) {
            if (nan[r] != 0.0) top[r] = NAN;
            thr[r] = top[r] * factor;
            found[r] = 0;
            sgn[r] = Ug[r] < 0 ? -1.0 : 1.0; /* j = 0 unless an entry reaches the threshold (NaN top) */
        }
        Py_ssize_t left = k;
        for (Py_ssize_t s = 0; s < S && left > 0; s++)
            for (Py_ssize_t r = 0; r < k; r++)
                if (!found[r] && fabs(Ug[s * S + r]) >= thr[r]) {
                    found[r] = 1;
                    left--;
                    sgn[r] = Ug[s * S + r] < 0 ? -1.0 : 1.0;
                }
        for (Py_ssize_t s = 0; s < S; s++) {
            double *prow = s < n[g] ? pe + (start[g] + s) * k : NULL;
            for (Py_ssize_t r = 0; r < k; r++) {
                const double v = ((Ug[s * S + r] * sgn[r]) * vg[r]) + 0.0;
                V[r * S + s] = v;
                if (prow != NULL) prow[r] = v;
            }
        }
    }
    Py_END_ALLOW_THREADS;
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyMem_Free(work);
    PyMem_Free(found);
    release_buffers(b, 6);
    return result;
}

static PyMethodDef methods[] = {
    {"rows", rows, METH_VARARGS, "rows(U, c0, valid, factor, Vt): kept sign-fixed eigenvectors as rows, into Vt."},
    {"place", place, METH_VARARGS,
     "place(U, c0, valid, factor, n, rowstart, Vt, pe): rows() into Vt and into the batch output pe."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_lapmodes", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_lapmodes(void) { return PyModule_Create(&module); }
