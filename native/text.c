/* structpos._native_text: text checks every parser runs on its input.

   first_surrogate(text) -> int

     The index of the first lone surrogate (U+D800..U+DFFF) in the str `text`, or -1. A str whose
     widest character is below U+0100 (one byte per character) holds none, so it returns at once;
     wider strings are scanned once. The GIL is held (a read of an immutable str). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *first_surrogate(PyObject *self, PyObject *arg) {
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "first_surrogate: expected str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const int kind = PyUnicode_KIND(arg);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *s = PyUnicode_2BYTE_DATA(arg);
        for (Py_ssize_t i = 0; i < n; i++)
            if ((s[i] & 0xF800) == 0xD800) return PyLong_FromSsize_t(i);
    } else if (kind == PyUnicode_4BYTE_KIND) {
        const Py_UCS4 *s = PyUnicode_4BYTE_DATA(arg);
        for (Py_ssize_t i = 0; i < n; i++)
            if ((s[i] & 0xFFFFF800u) == 0xD800) return PyLong_FromSsize_t(i);
    }
    return PyLong_FromLong(-1);
}

static PyMethodDef methods[] = {
    {"first_surrogate", first_surrogate, METH_O, "Index of the first lone surrogate in a str, or -1."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_text", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_text(void) { return PyModule_Create(&module); }
