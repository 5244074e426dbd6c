/* A growable array of int64 (the row and cell columns the table scanners build; included by each).

   push(a, x): append x, growing the array as needed; 0, or -1 with MemoryError set. The caller
   frees a->v. */
#ifndef STRUCTPOS_NATIVE_INTS_H
#define STRUCTPOS_NATIVE_INTS_H
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} Ints;

static int push(Ints *a, int64_t x) {
    if (a->n == a->cap) {
        Py_ssize_t cap = a->cap ? 2 * a->cap : 64;
        int64_t *v = realloc(a->v, (size_t)cap * sizeof(int64_t));
        if (!v) {
            PyErr_NoMemory();
            return -1;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}
#endif
