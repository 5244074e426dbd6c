/* structpos._native_lapmodes: the kept, sign-fixed eigenvectors of one size group, in one pass.

   rows(U, c0, valid, factor, Vt) -> None

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
    Py_buffer bu, bv, bt;
    if (get_typed_buffer(o_U, &bu, "U", 'd', 0, 3) < 0) return NULL;
    if (get_typed_buffer(o_valid, &bv, "valid", 'd', 0, 2) < 0) {
        PyBuffer_Release(&bu);
        return NULL;
    }
    if (get_typed_buffer(o_Vt, &bt, "Vt", 'd', 1, 3) < 0) {
        PyBuffer_Release(&bu);
        PyBuffer_Release(&bv);
        return NULL;
    }
    PyObject *result = NULL;
    const Py_ssize_t G = bu.shape[0], S = bu.shape[1], k = bt.shape[1];
    if (bu.shape[2] != S || bt.shape[0] != G || bt.shape[2] != S || bv.shape[0] != G || bv.shape[1] != k || c0 < 0 ||
        k < 1 || c0 > S - k) {
        PyErr_SetString(PyExc_ValueError, "rows: shapes of U (G, S, S), valid (G, k), Vt (G, k, S) or c0 disagree");
        goto done;
    }
    const double *U = bu.buf, *valid = bv.buf;
    double *Vt = bt.buf;
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
    PyBuffer_Release(&bu);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&bt);
    return result;
}

static PyMethodDef methods[] = {
    {"rows", rows, METH_VARARGS, "rows(U, c0, valid, factor, Vt): kept sign-fixed eigenvectors as rows, into Vt."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_lapmodes", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_lapmodes(void) { return PyModule_Create(&module); }
