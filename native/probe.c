/* structpos._native_probe: proves the optional native build ran (see structpos/native.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *abi(PyObject *self, PyObject *args) { return PyLong_FromLong(1); }

static PyMethodDef methods[] = {
    {"abi", abi, METH_NOARGS, "The native fast paths' interface version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_probe", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_probe(void) { return PyModule_Create(&module); }
