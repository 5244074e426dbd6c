/* The one typed-buffer check of the native modules (included by each; every module is its own extension).

   get_typed_buffer(obj, view, name, kind, writable, ndim): the C-contiguous buffer of obj with 8-byte
   items of kind 'i' (int64) or 'd' (float64), writable when asked, with ndim dimensions (any when
   ndim < 0). Returns 0, or -1 with a TypeError naming `name` and nothing held.

   get_typed_buffers(n, objs, views, spec): the same for the n arguments of a call, spec[i] giving each
   one's name, kind, writability and ndim; 0 with all n held, or -1 with none held.
   release_buffers(views, n): release n held views. */
#ifndef STRUCTPOS_NATIVE_BUFFERS_H
#define STRUCTPOS_NATIVE_BUFFERS_H
#include <Python.h>

static int get_typed_buffer(PyObject *obj, Py_buffer *view, const char *name, char kind, int writable, int ndim) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int ok = view->itemsize == 8 && f[1] == '\0' && (kind == 'i' ? (f[0] == 'q' || f[0] == 'l') : f[0] == 'd') &&
             (ndim < 0 || view->ndim == ndim);
    if (!ok) {
        const char *type = kind == 'i' ? "int64" : "float64";
        if (ndim < 0)
            PyErr_Format(PyExc_TypeError, "%s must be a contiguous %s array", name, type);
        else
            PyErr_Format(PyExc_TypeError, "%s must be a contiguous %dD %s array", name, ndim, type);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

typedef struct {
    const char *name;
    char kind; /* 'i' int64, 'd' float64 */
    int writable;
    int ndim; /* < 0: any */
} BufferSpec;

static void release_buffers(Py_buffer *views, int n) {
    while (n-- > 0) PyBuffer_Release(&views[n]);
}

static int get_typed_buffers(int n, PyObject *const *objs, Py_buffer *views, const BufferSpec *spec) {
    for (int i = 0; i < n; i++)
        if (get_typed_buffer(objs[i], &views[i], spec[i].name, spec[i].kind, spec[i].writable, spec[i].ndim) < 0) {
            release_buffers(views, i);
            return -1;
        }
    return 0;
}
#endif
