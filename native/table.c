/* structpos._native_table: the CSV field scanner and the layout of a table without merged cells.

   scan_csv(text, delimiter, quotechar, escapechar) -> (ints, cell_text) or None

     The fields of `text` as structpos/parsers/table_csv.py::_scan_regex splits them (Python's csv
     module, excel dialect, strict=False): records end at \r\n, \r or \n outside quotes, an empty
     unquoted line is no record; a field opening with the quote runs to its closing quote ("" is one
     quote) and the text after that quote up to the terminator is appended to the value; with an
     escape character the character after it is literal and the escape dropped. `delimiter` is a
     code point, `quotechar` and `escapechar` a code point or -1 (none).
     ints is a bytearray of int64: n_rows, n_cells, then row_start, row_end, row_count (n_rows each),
     then cell_start, cell_end (n_cells each), offsets in code points; cell_text the decoded values.
     None when the scanner meets what the regex scanner reports as an error (an unterminated quoted
     field, an escape character at the end): the caller then runs that scanner for the message.

   layout(row_count, row_start, row_end, cell_start, cell_end, cell_text, header_rows, table_start, table_end)
       -> (bytearray, node_texts, grid)

     The node arrays of structpos/parsers/_table_build.py's layout (table node 0, each row followed
     by its cells) when no cell spans rows or columns: 9 rows of n = 1 + rows + cells int64 values,
     parent, start, end, row, col, rowspan, colspan, header (-1 on the table and row nodes), and the
     label code (0 table, 1 row, 2 cell, 3 header cell). Inputs are int64 buffers; their lengths
     are checked against each other (the row counts must sum to the cells); node_texts is the list of
     the cell_text values at the cell nodes, None at the others; grid the rows of cell texts, each
     padded with None to the longest row.

   The GIL is held throughout: both build Python objects or run in microseconds. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "buffers.h"
#include "ints.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
    Py_UCS4 d, q, e; /* q, e: (Py_UCS4)-1 when absent */
} Src;

#define AT(s, i) PyUnicode_READ((s)->kind, (s)->data, (i))
#define IS_NL(c) ((c) == '\r' || (c) == '\n')
/* The character loops below are written once for a `kind` argument and called through BY_KIND, which
   passes the string kind as a constant: each inlined copy reads its text without a kind switch per
   character. */
#define INLINE static inline __attribute__((always_inline))
#define BY_KIND(f, s, ...)                                                                                   \
    ((s)->kind == PyUnicode_1BYTE_KIND   ? f(PyUnicode_1BYTE_KIND, s, __VA_ARGS__)                        \
     : (s)->kind == PyUnicode_2BYTE_KIND ? f(PyUnicode_2BYTE_KIND, s, __VA_ARGS__)                        \
                                         : f(PyUnicode_4BYTE_KIND, s, __VA_ARGS__))

/* The end of an unquoted run starting at i: the next delimiter or newline (escaped ones are data);
   -1 when an escape character is the last character. */
INLINE Py_ssize_t plain_end_k(int kind, const Src *s, Py_ssize_t i) {
    while (i < s->n) {
        Py_UCS4 c = PyUnicode_READ(kind, s->data, i);
        if (c == s->d || IS_NL(c)) break;
        if (c == s->e) {
            if (i + 1 >= s->n) return -1;
            i += 2;
        } else
            i++;
    }
    return i;
}

static Py_ssize_t plain_end(const Src *s, Py_ssize_t i) { return BY_KIND(plain_end_k, s, i); }

/* The closing quote of the quoted content starting at i; -1 when there is none. */
INLINE Py_ssize_t closing_quote_k(int kind, const Src *s, Py_ssize_t i) {
    while (i < s->n) {
        Py_UCS4 c = PyUnicode_READ(kind, s->data, i);
        if (c == s->e) {
            if (i + 1 >= s->n) return -1;
            i += 2;
        } else if (c == s->q) {
            if (i + 1 < s->n && PyUnicode_READ(kind, s->data, i + 1) == s->q)
                i += 2;
            else
                return i;
        } else
            i++;
    }
    return -1;
}

static Py_ssize_t closing_quote(const Src *s, Py_ssize_t i) { return BY_KIND(closing_quote_k, s, i); }

/* Append the decoded characters of [a, b) to buf: escapes dropped, and "" -> " when quoted. */
static Py_ssize_t decode(const Src *s, Py_ssize_t a, Py_ssize_t b, int quoted, Py_UCS4 *buf, Py_ssize_t k) {
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = AT(s, i);
        if (c == s->e && i + 1 < b)
            c = AT(s, ++i);
        else if (quoted && c == s->q && i + 1 < b && AT(s, i + 1) == s->q)
            i++;
        buf[k++] = c;
    }
    return k;
}

INLINE int needs_decoding_k(int kind, const Src *s, Py_ssize_t a, Py_ssize_t b, int quoted) {
    for (Py_ssize_t i = a; i < b; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, s->data, i);
        if (c == s->e || (quoted && c == s->q)) return 1;
    }
    return 0;
}

static int needs_decoding(const Src *s, Py_ssize_t a, Py_ssize_t b, int quoted) {
    return BY_KIND(needs_decoding_k, s, a, b, quoted);
}

/* The value of a field: content [a, b) (quoted or not) followed by the unquoted tail [t, u). */
static PyObject *field_value(PyObject *text, const Src *s, Py_ssize_t a, Py_ssize_t b, int quoted, Py_ssize_t t,
                             Py_ssize_t u, Py_UCS4 **scratch, Py_ssize_t *scratch_cap) {
    if (t == u && !needs_decoding(s, a, b, quoted)) return PyUnicode_Substring(text, a, b);
    Py_ssize_t need = (b - a) + (u - t);
    if (need > *scratch_cap) {
        Py_UCS4 *p = realloc(*scratch, (size_t)need * sizeof(Py_UCS4));
        if (!p) return PyErr_NoMemory();
        *scratch = p;
        *scratch_cap = need;
    }
    Py_ssize_t k = decode(s, a, b, quoted, *scratch, 0);
    k = decode(s, t, u, 0, *scratch, k);
    return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, *scratch, k); /* narrowed to the canonical kind */
}

static PyObject *scan_csv(PyObject *self, PyObject *args) {
    PyObject *text;
    long long d, q, e;
    if (!PyArg_ParseTuple(args, "ULLL:scan_csv", &text, &d, &q, &e)) return NULL;
    Src s = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), (Py_UCS4)d, (Py_UCS4)q,
             (Py_UCS4)e};
    if (d < 0 || d > 0x10FFFF || IS_NL(s.d) || (q >= 0 && (Py_UCS4)q == s.d)) {
        PyErr_SetString(PyExc_ValueError, "scan_csv: bad delimiter or quote character");
        return NULL;
    }
    Ints rs = {0}, re = {0}, rc = {0}, cs = {0}, ce = {0};
    Py_UCS4 *scratch = NULL;
    Py_ssize_t scratch_cap = 0;
    PyObject *texts = PyList_New(0), *result = NULL, *ints = NULL;
    if (!texts) goto done;
    Py_ssize_t pos = 0, n = s.n;
    int at_record_start = 1;
    int64_t count = 0;
    for (;;) {
        if (pos == n && at_record_start) break;
        Py_ssize_t span_a, span_b, field_end, content_a, content_b, tail_a;
        int quoted = q >= 0 && pos < n && AT(&s, pos) == s.q;
        if (quoted) {
            Py_ssize_t close = closing_quote(&s, pos + 1);
            if (close < 0) goto unparsed;
            field_end = plain_end(&s, close + 1);
            if (field_end < 0) goto unparsed;
            content_a = pos + 1, content_b = close, tail_a = close + 1;
            span_a = pos + 1, span_b = field_end > tail_a ? field_end : close;
        } else {
            field_end = plain_end(&s, pos);
            if (field_end < 0) goto unparsed;
            content_a = span_a = pos, content_b = span_b = tail_a = field_end;
        }
        /* the terminator: a delimiter, a newline (\r\n is one) or the end */
        Py_ssize_t next = field_end;
        int ends_record = 1;
        if (field_end < n) {
            Py_UCS4 c = AT(&s, field_end);
            if (c == s.d) {
                ends_record = 0;
                next = field_end + 1;
            } else
                next = field_end + ((c == '\r' && field_end + 1 < n && AT(&s, field_end + 1) == '\n') ? 2 : 1);
        }
        if (!quoted && at_record_start && field_end == pos && ends_record) { /* an empty line: no record */
            pos = next;
            continue;
        }
        PyObject *value = field_value(text, &s, content_a, content_b, quoted, tail_a, field_end, &scratch, &scratch_cap);
        if (!value) goto done;
        int bad = PyList_Append(texts, value);
        Py_DECREF(value);
        if (bad || push(&cs, span_a) || push(&ce, span_b)) goto done;
        if (at_record_start) {
            if (push(&rs, pos)) goto done;
            at_record_start = 0;
            count = 0;
        }
        count++;
        if (ends_record) {
            if (push(&re, field_end) || push(&rc, count)) goto done;
            at_record_start = 1;
        }
        pos = next;
    }
    Py_ssize_t nr = rs.n, nc = cs.n, total = 2 + 3 * nr + 2 * nc;
    ints = PyByteArray_FromStringAndSize(NULL, total * 8);
    if (!ints) goto done;
    int64_t *out = (int64_t *)PyByteArray_AS_STRING(ints);
    out[0] = nr, out[1] = nc;
    Ints *parts[5] = {&rs, &re, &rc, &cs, &ce};
    Py_ssize_t at = 2;
    for (int k = 0; k < 5; k++) {
        if (parts[k]->n) memcpy(out + at, parts[k]->v, (size_t)parts[k]->n * 8);
        at += parts[k]->n;
    }
    result = PyTuple_Pack(2, ints, texts);
    goto done;
unparsed:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    Py_XDECREF(ints);
    Py_XDECREF(texts);
    free(rs.v), free(re.v), free(rc.v), free(cs.v), free(ce.v), free(scratch);
    return result;
}

static PyObject *new_ref(PyObject *o) {
    Py_INCREF(o);
    return o;
}

static PyObject *layout(PyObject *self, PyObject *args) {
    PyObject *objs[5], *cell_text;
    long long header_rows, t_start, t_end;
    if (!PyArg_ParseTuple(args, "OOOOOO!LLL:layout", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &PyList_Type,
                          &cell_text, &header_rows, &t_start, &t_end))
        return NULL;
    static const BufferSpec spec[5] = {{"row_count", 'i', 0, 1}, {"row_start", 'i', 0, 1}, {"row_end", 'i', 0, 1},
                                       {"cell_start", 'i', 0, 1}, {"cell_end", 'i', 0, 1}};
    Py_buffer b[5];
    if (get_typed_buffers(5, objs, b, spec) < 0) return NULL;
    PyObject *result = NULL, *arrays = NULL, *texts = NULL, *grid = NULL;
    const int64_t *count = b[0].buf, *r_start = b[1].buf, *r_end = b[2].buf, *c_start = b[3].buf, *c_end = b[4].buf;
    const Py_ssize_t nr = b[0].len / 8, nc = b[3].len / 8;
    int64_t sum = 0;
    for (Py_ssize_t r = 0; r < nr; r++) {
        if (count[r] < 0 || count[r] > nc) break;
        sum += count[r];
    }
    if (b[1].len / 8 != nr || b[2].len / 8 != nr || b[4].len / 8 != nc || sum != nc ||
        PyList_GET_SIZE(cell_text) != nc) {
        PyErr_SetString(PyExc_ValueError, "layout: inconsistent row and cell arrays");
        goto done;
    }
    const Py_ssize_t n = 1 + nr + nc;
    int64_t n_cols = 0;
    for (Py_ssize_t r = 0; r < nr; r++)
        if (count[r] > n_cols) n_cols = count[r];
    arrays = PyByteArray_FromStringAndSize(NULL, 9 * n * 8);
    texts = PyList_New(n);
    grid = PyList_New(nr);
    if (!arrays || !texts || !grid) goto done;
    int64_t *o = (int64_t *)PyByteArray_AS_STRING(arrays);
    int64_t *parent = o, *start = o + n, *end = o + 2 * n, *row = o + 3 * n, *col = o + 4 * n, *rsp = o + 5 * n,
            *csp = o + 6 * n, *head = o + 7 * n, *label = o + 8 * n;
    for (Py_ssize_t i = 0; i < 9 * n; i++) o[i] = -1;
    start[0] = t_start, end[0] = t_end, label[0] = 0;
    PyList_SET_ITEM(texts, 0, new_ref(Py_None));
    Py_ssize_t node = 1, cell = 0;
    for (Py_ssize_t r = 0; r < nr; r++) {
        const Py_ssize_t row_node = node++;
        parent[row_node] = 0, start[row_node] = r_start[r], end[row_node] = r_end[r], label[row_node] = 1;
        PyList_SET_ITEM(texts, row_node, new_ref(Py_None));
        const int64_t is_head = r < header_rows;
        PyObject *grid_row = PyList_New(n_cols);
        if (!grid_row) goto done;
        PyList_SET_ITEM(grid, r, grid_row);
        for (int64_t c = count[r]; c < n_cols; c++) PyList_SET_ITEM(grid_row, c, new_ref(Py_None));
        for (int64_t c = 0; c < count[r]; c++, cell++, node++) {
            parent[node] = row_node, start[node] = c_start[cell], end[node] = c_end[cell];
            row[node] = r, col[node] = c, rsp[node] = 1, csp[node] = 1, head[node] = is_head;
            label[node] = 2 + is_head;
            PyObject *value = PyList_GET_ITEM(cell_text, cell);
            PyList_SET_ITEM(texts, node, new_ref(value));
            PyList_SET_ITEM(grid_row, c, new_ref(value));
        }
    }
    result = PyTuple_Pack(3, arrays, texts, grid);
done:
    release_buffers(b, 5);
    Py_XDECREF(arrays);
    Py_XDECREF(texts);
    Py_XDECREF(grid);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_csv", scan_csv, METH_VARARGS, "CSV fields with code-point spans (see the module comment)."},
    {"layout", layout, METH_VARARGS, "Node arrays of a table without merged cells (see the module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_table", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_table(void) { return PyModule_Create(&module); }
