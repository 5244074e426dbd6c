/* structpos._native_text: text checks every parser runs on its input.

   first_surrogate(text) -> int

     The index of the first lone surrogate (U+D800..U+DFFF) in the str `text`, or -1. A str whose
     widest character is below U+0100 (one byte per character) holds none, so it returns at once;
     wider strings are scanned once.

   utf8_column(values) -> (offsets, data, valid)

     The buffers of an Arrow string column (structpos/pipeline/arrow.py::string_array): each value's
     str() in UTF-8, back to back in `data` (bytes), `offsets` (bytearray of n + 1 int64) where each
     begins, and `valid` (bytearray of n 0/1 flags, 0 where the value is None and its text empty) or
     None when no value is None. ASCII str are copied as they are; other values go through str() and
     the strict UTF-8 codec, so a lone surrogate raises UnicodeEncodeError as str.encode does.

   The GIL is held throughout. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* Append value's str() in UTF-8 to *buf; 0, or -1 with an exception set. */
static int append_utf8(PyObject *value, char **buf, size_t *len, size_t *cap) {
    PyObject *text = PyUnicode_CheckExact(value) ? (Py_INCREF(value), value) : PyObject_Str(value);
    if (!text) return -1;
    PyObject *encoded = NULL;
    const char *p;
    Py_ssize_t m;
    if (PyUnicode_IS_ASCII(text)) {
        p = (const char *)PyUnicode_DATA(text), m = PyUnicode_GET_LENGTH(text);
    } else {
        encoded = PyUnicode_AsUTF8String(text); /* a new bytes object: nothing is cached on the str */
        if (!encoded) {
            Py_DECREF(text);
            return -1;
        }
        p = PyBytes_AS_STRING(encoded), m = PyBytes_GET_SIZE(encoded);
    }
    int rc = 0;
    if (*len + (size_t)m > *cap) {
        size_t cap2 = *cap ? *cap : 4096;
        while (cap2 < *len + (size_t)m) cap2 *= 2;
        char *grown = realloc(*buf, cap2);
        if (!grown) {
            PyErr_NoMemory();
            rc = -1;
        } else
            *buf = grown, *cap = cap2;
    }
    if (rc == 0 && m) {
        memcpy(*buf + *len, p, (size_t)m);
        *len += (size_t)m;
    }
    Py_XDECREF(encoded);
    Py_DECREF(text);
    return rc;
}

static PyObject *utf8_column(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "utf8_column: expected a sequence");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *offsets = PyByteArray_FromStringAndSize(NULL, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    PyObject *valid = NULL, *data = NULL, *result = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    if (!offsets) goto done;
    int64_t *off = (int64_t *)PyByteArray_AS_STRING(offsets);
    for (Py_ssize_t i = 0; i < n; i++) {
        off[i] = (int64_t)len;
        if (i >= PySequence_Fast_GET_SIZE(seq)) { /* a __str__ shrank the list */
            PyErr_SetString(PyExc_RuntimeError, "utf8_column: the sequence changed size");
            goto done;
        }
        PyObject *value = PySequence_Fast_GET_ITEM(seq, i);
        if (value == Py_None) {
            if (!valid) {
                valid = PyByteArray_FromStringAndSize(NULL, n);
                if (!valid) goto done;
                memset(PyByteArray_AS_STRING(valid), 1, (size_t)n);
            }
            PyByteArray_AS_STRING(valid)[i] = 0;
            continue;
        }
        Py_INCREF(value); /* a __str__ may drop it from the list */
        int rc = append_utf8(value, &buf, &len, &cap);
        Py_DECREF(value);
        if (rc < 0) goto done;
    }
    off[n] = (int64_t)len;
    data = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
    if (data) result = PyTuple_Pack(3, offsets, data, valid ? valid : Py_None);
done:
    free(buf);
    Py_XDECREF(data);
    Py_XDECREF(valid);
    Py_XDECREF(offsets);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"first_surrogate", first_surrogate, METH_O, "Index of the first lone surrogate in a str, or -1."},
    {"utf8_column", utf8_column, METH_O, "Arrow string buffers of a sequence of values (see the module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_text", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_text(void) { return PyModule_Create(&module); }
