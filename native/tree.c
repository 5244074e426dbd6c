/* structpos._native_tree: the "tree" coordinate family (structpos/coords/tree.py::tree_coords) in one pass.
 *
 * fill(parent, depth, sibling, num_children, subtree_size, root_path, overflow, max_depth, max_width) fills the
 * caller's (numpy) buffers from a parent array in preorder with a stack of the open ancestors, and returns
 * False, leaving the buffers half-filled, when the parent array is not a preorder (the caller then runs the
 * pure path, which raises the error naming the node). O(N + N * max_depth) work, bounded by the buffers'
 * sizes, which are all checked against N before anything is written. The GIL is held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int check(Py_buffer *b, Py_ssize_t items, Py_ssize_t itemsize, const char *what) {
    if (b->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd", what, b->len, items * itemsize);
        return -1;
    }
    return 0;
}

static PyObject *fill(PyObject *self, PyObject *args) {
    Py_buffer pb, db, sb, cb, zb, rb, ob;
    long long max_depth, max_width;
    if (!PyArg_ParseTuple(args, "y*w*w*w*w*w*w*LL:fill", &pb, &db, &sb, &cb, &zb, &rb, &ob, &max_depth, &max_width))
        return NULL;
    PyObject *result = NULL;
    int64_t *stack = NULL;
    Py_ssize_t n = pb.len / 8;
    Py_ssize_t item = (max_width <= 16384) ? 2 : 4; /* path_dtype: int16, else int32 */
    if (max_depth < 1 || max_width < 1 || max_depth > 1 << 20) {
        PyErr_SetString(PyExc_ValueError, "max_depth and max_width must be >= 1");
        goto done;
    }
    if (pb.len % 8 || check(&db, n, 8, "depth") || check(&sb, n, 8, "sibling") || check(&cb, n, 8, "num_children") ||
        check(&zb, n, 8, "subtree_size") || check(&ob, n, 1, "overflow") ||
        (n && rb.len / n / item != max_depth) || rb.len != n * item * max_depth) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "root_path: wrong size");
        goto done;
    }
    const int64_t *p = pb.buf;
    int64_t *depth = db.buf, *sib = sb.buf, *nch = cb.buf, *size = zb.buf;
    uint8_t *overflow = ob.buf;
    stack = malloc(((size_t)n + 1) * sizeof(int64_t));
    if (stack == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t D = (Py_ssize_t)max_depth;
    int64_t W1 = max_width - 1, roots = 0, sp = 0; /* stack[0..sp) : the ancestors of node i, root first */
    memset(nch, 0, (size_t)n * 8);
    int valid = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t q = p[i];
        if (q < -1 || q >= i) {
            valid = 0;
            break;
        }
        while (sp > 0 && stack[sp - 1] != q) { /* close the subtrees that ended before i */
            int64_t j = stack[--sp];
            size[j] = i - j;
        }
        if (q >= 0 && sp == 0) { /* q is not an open ancestor: its subtree was interrupted */
            valid = 0;
            break;
        }
        int64_t d = sp, s = q >= 0 ? nch[q]++ : roots++;
        depth[i] = d;
        sib[i] = s;
        stack[sp++] = i;
        if (item == 2) {
            int16_t *row = (int16_t *)rb.buf + (size_t)i * D;
            if (q >= 0) memcpy(row, (int16_t *)rb.buf + (size_t)q * D, (size_t)D * 2);
            else for (Py_ssize_t k = 0; k < D; k++) row[k] = -1;
            if (d >= 1 && d <= D) row[d - 1] = (int16_t)(s < W1 ? s : W1);
        } else {
            int32_t *row = (int32_t *)rb.buf + (size_t)i * D;
            if (q >= 0) memcpy(row, (int32_t *)rb.buf + (size_t)q * D, (size_t)D * 4);
            else for (Py_ssize_t k = 0; k < D; k++) row[k] = -1;
            if (d >= 1 && d <= D) row[d - 1] = (int32_t)(s < W1 ? s : W1);
        }
        overflow[i] = d > D || (q >= 0 && (overflow[q] || s > W1));
    }
    if (valid) {
        while (sp > 0) {
            int64_t j = stack[--sp];
            size[j] = n - j;
        }
    }
    result = PyBool_FromLong(valid);
done:
    free(stack);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&db);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&zb);
    PyBuffer_Release(&rb);
    PyBuffer_Release(&ob);
    return result;
}

static PyMethodDef methods[] = {
    {"fill", fill, METH_VARARGS,
     "fill(parent, depth, sibling, num_children, subtree_size, root_path, overflow, max_depth, max_width) -> "
     "whether parent is a preorder"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_tree",
                                    "Tree coordinates of a preorder parent array (structpos.coords.tree).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__native_tree(void) { return PyModule_Create(&module); }
