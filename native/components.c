/* structpos._native_components: connected components with >= 2 nodes, per graph of a batch.

   nontrivial(row, col, eptr, ptr, counts) -> None

   Graph g owns the packed edges eptr[g]..eptr[g+1]-1 (row/col: int64 node indices local to the
   graph, which has ptr[g+1] - ptr[g] nodes); counts[g] (int64) receives the number of weakly
   connected components of at least two nodes (self-loops connect nothing). Union-find with
   path halving: a component count is touched nodes minus successful unions.

   Bounds: every offset is checked against the buffers' lengths and every edge index against its
   graph's node count before any work; the workspace is one int64 per node of the largest graph.
   The GIL is released only around the union-find, which touches no Python object. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buffers.h"
#include <stdint.h>
#include <stdlib.h>

static int64_t find(int64_t *parent, int64_t x) {
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static PyObject *nontrivial(PyObject *self, PyObject *args) {
    PyObject *objs[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4])) return NULL;
    static const BufferSpec spec[5] = {
        {"row", 'i', 0, -1}, {"col", 'i', 0, -1}, {"eptr", 'i', 0, -1}, {"ptr", 'i', 0, -1}, {"counts", 'i', 1, -1}};
    Py_buffer b[5];
    if (get_typed_buffers(5, objs, b, spec) < 0) return NULL;
    PyObject *result = NULL;
    const int64_t *row = b[0].buf, *col = b[1].buf, *eptr = b[2].buf, *ptr = b[3].buf;
    int64_t *counts = b[4].buf;
    const Py_ssize_t E = b[0].len / 8, nb = b[3].len / 8 - 1;
    if (nb < 0 || b[1].len / 8 != E || b[2].len / 8 != nb + 1 || b[4].len / 8 != nb) {
        PyErr_SetString(PyExc_ValueError, "nontrivial: inconsistent buffer lengths");
        goto done;
    }
    int64_t nmax = 0;
    for (Py_ssize_t g = 0; g < nb; g++) {
        if (eptr[g] < 0 || eptr[g] > eptr[g + 1] || eptr[g + 1] > E || ptr[g] > ptr[g + 1] || ptr[g] < 0) {
            PyErr_Format(PyExc_ValueError, "nontrivial: offsets of graph %zd out of range", g);
            goto done;
        }
        const int64_t n = ptr[g + 1] - ptr[g];
        for (int64_t e = eptr[g]; e < eptr[g + 1]; e++)
            if (row[e] < 0 || row[e] >= n || col[e] < 0 || col[e] >= n) {
                PyErr_Format(PyExc_ValueError, "nontrivial: graph %zd, edge %lld out of range", g,
                             (long long)(e - eptr[g]));
                goto done;
            }
        if (n > nmax) nmax = n;
    }
    if ((uint64_t)nmax > (uint64_t)(PY_SSIZE_T_MAX / 16)) {
        PyErr_SetString(PyExc_MemoryError, "nontrivial: graph too large");
        goto done;
    }
    int64_t *parent = malloc((size_t)(2 * nmax + 1) * sizeof(int64_t));
    if (!parent) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *touched = parent + nmax;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t g = 0; g < nb; g++) {
        const int64_t n = ptr[g + 1] - ptr[g];
        for (int64_t i = 0; i < n; i++) {
            parent[i] = i;
            touched[i] = 0;
        }
        int64_t nodes = 0, unions = 0;
        for (int64_t e = eptr[g]; e < eptr[g + 1]; e++) {
            const int64_t u = row[e], v = col[e];
            if (u == v) continue;
            nodes += !touched[u] + !touched[v];
            touched[u] = touched[v] = 1;
            int64_t ru = find(parent, u), rv = find(parent, v);
            if (ru != rv) {
                parent[ru < rv ? rv : ru] = ru < rv ? ru : rv;
                unions++;
            }
        }
        counts[g] = nodes - unions;
    }
    Py_END_ALLOW_THREADS;
    free(parent);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release_buffers(b, 5);
    return result;
}

static PyMethodDef methods[] = {
    {"nontrivial", nontrivial, METH_VARARGS,
     "nontrivial(row, col, eptr, ptr, counts): components of >= 2 nodes per graph, into counts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_components", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_components(void) { return PyModule_Create(&module); }
