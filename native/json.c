/* structpos._native_json: JSON text -> the flat preorder tree of structpos.parsers.json_tree.
 *
 * scan(text: str, max_nodes: int) walks the str's code points (all three PEP 393 kinds) once,
 * with an explicit container stack (no recursion), and accepts exactly what json.loads
 * accepts (strict strings; NaN, Infinity, -Infinity; whitespace " \t\n\r"). It returns
 *
 *     (kind, parent, start, end, index, members, member_key, keys)
 *
 * where the first five are bytearrays of one entry per node in preorder (kind: uint8 codes
 * 0 object 1 array 2 member 3 string 4 boolean 5 null 6 number; the rest int64, code-point
 * offsets), ``members`` (int64) lists the member nodes, ``member_key`` (int64) each one's entry
 * in ``keys``, and ``keys`` is the list of distinct member keys, decoded as json.loads decodes
 * them. On any input json.loads (or the
 * pure-Python scanner) would refuse, and when the tree would exceed max_nodes, it returns
 * None: the pure-Python scanner then runs and raises its own error.
 *
 * Work is one pass over the text plus the key decoding; memory is O(nodes + depth); every
 * read is bounds-checked against the text length. The scan itself runs without the GIL (it
 * touches only the immutable str's buffer and C memory); the key objects are made after.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#define SP_INLINE static __forceinline
#else
#define SP_INLINE static inline __attribute__((always_inline))
#endif

enum { K_OBJECT = 0, K_ARRAY = 1, K_MEMBER = 2, K_STRING = 3, K_BOOLEAN = 4, K_NULL = 5, K_NUMBER = 6 };
enum { ST_OK = 0, ST_INVALID = 1, ST_LIMIT = 2, ST_NOMEM = 3 };

typedef struct {
    Py_ssize_t node; /* the container node */
    Py_ssize_t count; /* elements seen (arrays) */
    Py_ssize_t member; /* the open member node (objects) */
    int is_obj;
} Frame;

typedef struct {
    Py_ssize_t start, len; /* raw key characters (between the quotes) */
    uint64_t hash;
    int escaped;
} KeyEntry;

typedef struct {
    /* node columns */
    uint8_t *kind;
    int64_t *parent, *start, *end, *index, *key_id;
    Py_ssize_t n, cap, max_nodes, n_members;
    /* container stack */
    Frame *stack;
    Py_ssize_t depth, stack_cap;
    /* distinct raw keys: entries in first-seen order, an open-addressing table of entry ids */
    KeyEntry *keys;
    Py_ssize_t n_keys, keys_cap;
    int64_t *table;
    Py_ssize_t table_mask; /* table size - 1 (a power of two) */
} Scan;

static void scan_free(Scan *s) {
    PyMem_RawFree(s->kind);
    PyMem_RawFree(s->parent);
    PyMem_RawFree(s->start);
    PyMem_RawFree(s->end);
    PyMem_RawFree(s->index);
    PyMem_RawFree(s->key_id);
    PyMem_RawFree(s->stack);
    PyMem_RawFree(s->keys);
    PyMem_RawFree(s->table);
    memset(s, 0, sizeof(*s));
}

/* Make room for cap nodes (cap > s->n, cap <= s->max_nodes). */
static int reserve_nodes(Scan *s, Py_ssize_t cap) {
    if (cap <= s->n || (size_t)cap > SIZE_MAX / sizeof(int64_t)) return ST_NOMEM;
    void *p;
#define GROW(field, type)                                       \
    p = PyMem_RawRealloc(s->field, (size_t)cap * sizeof(type)); \
    if (p == NULL) return ST_NOMEM;                             \
    s->field = (type *)p;
    GROW(kind, uint8_t)
    GROW(parent, int64_t)
    GROW(start, int64_t)
    GROW(end, int64_t)
    GROW(index, int64_t)
    GROW(key_id, int64_t)
#undef GROW
    s->cap = cap;
    return ST_OK;
}

/* Double the node columns (at least 64 nodes, at most max_nodes). */
static int grow_nodes(Scan *s) {
    Py_ssize_t cap = s->cap < 32 ? 64 : (s->cap > PY_SSIZE_T_MAX / 2 ? PY_SSIZE_T_MAX : s->cap * 2);
    if (cap > s->max_nodes) cap = s->max_nodes;
    return reserve_nodes(s, cap);
}

/* Append a node; returns its id, or -(status) on failure. */
SP_INLINE Py_ssize_t add_node(Scan *s, int kind, Py_ssize_t parent, Py_ssize_t start, Py_ssize_t end,
                              Py_ssize_t index) {
    if (s->n >= s->max_nodes) return -ST_LIMIT;
    if (s->n >= s->cap) {
        int st = grow_nodes(s);
        if (st != ST_OK) return -st;
    }
    Py_ssize_t i = s->n++;
    s->kind[i] = (uint8_t)kind;
    s->parent[i] = parent;
    s->start[i] = start;
    s->end[i] = end;
    s->index[i] = index;
    s->key_id[i] = -1;
    return i;
}

static int push(Scan *s, Py_ssize_t node, int is_obj) {
    if (s->depth >= s->stack_cap) {
        Py_ssize_t cap = s->stack_cap ? s->stack_cap * 2 : 64;
        if ((size_t)cap > SIZE_MAX / sizeof(Frame)) return ST_NOMEM;
        Frame *p = (Frame *)PyMem_RawRealloc(s->stack, (size_t)cap * sizeof(Frame));
        if (p == NULL) return ST_NOMEM;
        s->stack = p;
        s->stack_cap = cap;
    }
    Frame *f = &s->stack[s->depth++];
    f->node = node;
    f->count = 1;
    f->member = -1;
    f->is_obj = is_obj;
    return ST_OK;
}

static int grow_table(Scan *s) {
    Py_ssize_t size = s->table ? (s->table_mask + 1) * 2 : 256;
    if ((size_t)size > SIZE_MAX / sizeof(int64_t)) return ST_NOMEM;
    int64_t *t = (int64_t *)PyMem_RawMalloc((size_t)size * sizeof(int64_t));
    if (t == NULL) return ST_NOMEM;
    for (Py_ssize_t i = 0; i < size; i++) t[i] = -1;
    Py_ssize_t mask = size - 1;
    for (Py_ssize_t k = 0; k < s->n_keys; k++) {
        Py_ssize_t slot = (Py_ssize_t)(s->keys[k].hash & (uint64_t)mask);
        while (t[slot] >= 0) slot = (slot + 1) & mask;
        t[slot] = k;
    }
    PyMem_RawFree(s->table);
    s->table = t;
    s->table_mask = mask;
    return ST_OK;
}

/* The id of the raw key text[a:b) (added when new), or -(status). */
static Py_ssize_t key_of(Scan *s, const void *data, int ksize, Py_ssize_t a, Py_ssize_t b, uint64_t hash,
                         int escaped) {
    if (s->table == NULL || (s->n_keys + 1) * 2 > s->table_mask + 1) {
        int st = grow_table(s);
        if (st != ST_OK) return -st;
    }
    Py_ssize_t len = b - a, mask = s->table_mask;
    Py_ssize_t slot = (Py_ssize_t)(hash & (uint64_t)mask);
    const char *raw = (const char *)data + a * ksize;
    for (;;) {
        int64_t k = s->table[slot];
        if (k < 0) break;
        KeyEntry *e = &s->keys[k];
        if (e->hash == hash && e->len == len &&
            memcmp((const char *)data + e->start * ksize, raw, (size_t)len * ksize) == 0)
            return (Py_ssize_t)k;
        slot = (slot + 1) & mask;
    }
    if (s->n_keys >= s->keys_cap) {
        Py_ssize_t cap = s->keys_cap ? s->keys_cap * 2 : 64;
        if ((size_t)cap > SIZE_MAX / sizeof(KeyEntry)) return -ST_NOMEM;
        KeyEntry *p = (KeyEntry *)PyMem_RawRealloc(s->keys, (size_t)cap * sizeof(KeyEntry));
        if (p == NULL) return -ST_NOMEM;
        s->keys = p;
        s->keys_cap = cap;
    }
    Py_ssize_t k = s->n_keys++;
    s->keys[k].start = a;
    s->keys[k].len = len;
    s->keys[k].hash = hash;
    s->keys[k].escaped = escaped;
    s->table[slot] = k;
    return k;
}

SP_INLINE int is_ws(Py_UCS4 c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
SP_INLINE int is_digit(Py_UCS4 c) { return c >= '0' && c <= '9'; }
SP_INLINE int hex_val(Py_UCS4 c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

#define RD(i) (K == 1 ? (Py_UCS4)((const Py_UCS1 *)data)[i] : K == 2 ? (Py_UCS4)((const Py_UCS2 *)data)[i] \
                                                                     : (Py_UCS4)((const Py_UCS4 *)data)[i])

/* Validate the string whose opening quote is at pos - 1; return the position after its closing
 * quote, or -1. The hash of its raw characters and whether it has escapes go to *hash / *escaped. */
SP_INLINE Py_ssize_t scan_string(const void *data, const int K, Py_ssize_t pos, Py_ssize_t n, uint64_t *hash,
                                 int *escaped, int want_hash) {
    uint64_t h = 1469598103934665603ULL;
    int esc = 0;
    while (pos < n) {
        Py_UCS4 c = RD(pos);
        if (c == '"') {
            if (want_hash) {
                *hash = h;
                *escaped = esc;
            }
            return pos + 1;
        }
        if (c < 0x20) return -1; /* strict: control characters must be escaped */
        if (want_hash) h = (h ^ c) * 1099511628211ULL;
        pos++;
        if (c == '\\') {
            esc = 1;
            if (pos >= n) return -1;
            c = RD(pos);
            if (want_hash) h = (h ^ c) * 1099511628211ULL;
            pos++;
            switch (c) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                break;
            case 'u':
                if (pos + 4 > n) return -1;
                for (int j = 0; j < 4; j++) {
                    Py_UCS4 d = RD(pos + j);
                    if (hex_val(d) < 0) return -1;
                    if (want_hash) h = (h ^ d) * 1099511628211ULL;
                }
                pos += 4;
                break;
            default:
                return -1;
            }
        }
    }
    return -1;
}

/* The number at pos (json's grammar, ASCII digits only); the position after it, or -1. */
SP_INLINE Py_ssize_t scan_number(const void *data, const int K, Py_ssize_t pos, Py_ssize_t n) {
    if (pos < n && RD(pos) == '-') pos++;
    if (pos >= n) return -1;
    Py_UCS4 c = RD(pos);
    if (c == '0') {
        pos++;
    } else if (c >= '1' && c <= '9') {
        pos++;
        while (pos < n && is_digit(RD(pos))) pos++;
    } else {
        return -1;
    }
    if (pos + 1 < n && RD(pos) == '.' && is_digit(RD(pos + 1))) {
        pos += 2;
        while (pos < n && is_digit(RD(pos))) pos++;
    }
    if (pos < n && (RD(pos) == 'e' || RD(pos) == 'E')) {
        Py_ssize_t e = pos + 1;
        if (e < n && (RD(e) == '+' || RD(e) == '-')) e++;
        if (e < n && is_digit(RD(e))) {
            e++;
            while (e < n && is_digit(RD(e))) e++;
            pos = e;
        }
    }
    return pos;
}

SP_INLINE int match_lit(const void *data, const int K, Py_ssize_t pos, Py_ssize_t n, const char *lit,
                        Py_ssize_t len) {
    if (pos + len > n) return 0;
    for (Py_ssize_t j = 0; j < len; j++)
        if (RD(pos + j) != (Py_UCS4)(unsigned char)lit[j]) return 0;
    return 1;
}

#define SKIP_WS() \
    while (pos < n && is_ws(RD(pos))) pos++

SP_INLINE int scan_impl(Scan *s, const void *data, const int K, Py_ssize_t n) {
    Py_ssize_t pos = 0, parent = -1, index = -1, node;
    uint64_t hash = 0;
    int escaped = 0;
    SKIP_WS();
    for (;;) {
        /* one value at pos, child of parent (element index, or -1) */
        if (pos >= n) return ST_INVALID;
        Py_UCS4 c = RD(pos);
        if (c == '{' || c == '[') {
            int is_obj = c == '{';
            node = add_node(s, is_obj ? K_OBJECT : K_ARRAY, parent, pos, -1, index);
            if (node < 0) return (int)-node;
            pos++;
            SKIP_WS();
            if (pos < n && RD(pos) == (is_obj ? '}' : ']')) {
                s->end[node] = ++pos;
                goto next_slot;
            }
            int st = push(s, node, is_obj);
            if (st != ST_OK) return st;
            if (is_obj) goto member;
            parent = node;
            index = 0;
            continue;
        }
        {
            Py_ssize_t end;
            int kind;
            if (c == '"') {
                end = scan_string(data, K, pos + 1, n, &hash, &escaped, 0);
                kind = K_STRING;
            } else if (c == 't' && match_lit(data, K, pos, n, "true", 4)) {
                end = pos + 4, kind = K_BOOLEAN;
            } else if (c == 'f' && match_lit(data, K, pos, n, "false", 5)) {
                end = pos + 5, kind = K_BOOLEAN;
            } else if (c == 'n' && match_lit(data, K, pos, n, "null", 4)) {
                end = pos + 4, kind = K_NULL;
            } else if (c == 'N' && match_lit(data, K, pos, n, "NaN", 3)) {
                end = pos + 3, kind = K_NUMBER;
            } else if (c == 'I' && match_lit(data, K, pos, n, "Infinity", 8)) {
                end = pos + 8, kind = K_NUMBER;
            } else if (c == '-' && match_lit(data, K, pos, n, "-Infinity", 9)) {
                end = pos + 9, kind = K_NUMBER;
            } else {
                end = scan_number(data, K, pos, n);
                kind = K_NUMBER;
            }
            if (end < 0) return ST_INVALID;
            node = add_node(s, kind, parent, pos, end, index);
            if (node < 0) return (int)-node;
            pos = end;
        }
    next_slot:
        /* after a value: close finished containers, find where the next value goes */
        for (;;) {
            SKIP_WS();
            if (s->depth == 0) return pos == n ? ST_OK : ST_INVALID;
            Frame *f = &s->stack[s->depth - 1];
            if (pos >= n) return ST_INVALID;
            c = RD(pos);
            if (f->is_obj) s->end[f->member] = s->end[f->member + 1];
            if (c == ',') {
                pos++;
                SKIP_WS();
                if (f->is_obj) goto member;
                parent = f->node;
                index = f->count++;
                break;
            }
            if (c != (f->is_obj ? '}' : ']')) return ST_INVALID;
            s->end[f->node] = ++pos;
            s->depth--;
        }
        continue;
    member:
        /* "key" : at pos inside the object on top of the stack; then its value */
        {
            Frame *f = &s->stack[s->depth - 1];
            if (pos >= n || RD(pos) != '"') return ST_INVALID;
            Py_ssize_t key_end = scan_string(data, K, pos + 1, n, &hash, &escaped, 1);
            if (key_end < 0) return ST_INVALID;
            node = add_node(s, K_MEMBER, f->node, pos, -1, -1);
            if (node < 0) return (int)-node;
            Py_ssize_t k = key_of(s, data, K, pos + 1, key_end - 1, hash, escaped);
            if (k < 0) return (int)-k;
            s->key_id[node] = k;
            s->n_members++;
            f->member = node;
            pos = key_end;
            SKIP_WS();
            if (pos >= n || RD(pos) != ':') return ST_INVALID;
            pos++;
            SKIP_WS();
            parent = node;
            index = -1;
        }
    }
}

static int scan_ucs1(Scan *s, const void *data, Py_ssize_t n) { return scan_impl(s, data, 1, n); }
static int scan_ucs2(Scan *s, const void *data, Py_ssize_t n) { return scan_impl(s, data, 2, n); }
static int scan_ucs4(Scan *s, const void *data, Py_ssize_t n) { return scan_impl(s, data, 4, n); }

/* Decode the (validated) raw key text[a:a+len) as json.loads does. */
SP_INLINE PyObject *decode_key_impl(const void *data, const int K, Py_ssize_t a, Py_ssize_t len) {
    Py_UCS4 *buf = (Py_UCS4 *)PyMem_Malloc((size_t)(len ? len : 1) * sizeof(Py_UCS4));
    if (buf == NULL) return PyErr_NoMemory();
    Py_ssize_t out = 0, pos = a, end = a + len;
    while (pos < end) {
        Py_UCS4 c = RD(pos);
        pos++;
        if (c != '\\') {
            buf[out++] = c;
            continue;
        }
        c = RD(pos); /* validated: an escape is complete inside the key */
        pos++;
        switch (c) {
        case 'b': buf[out++] = '\b'; break;
        case 'f': buf[out++] = '\f'; break;
        case 'n': buf[out++] = '\n'; break;
        case 'r': buf[out++] = '\r'; break;
        case 't': buf[out++] = '\t'; break;
        case 'u': {
            Py_UCS4 u = 0;
            for (int j = 0; j < 4; j++) u = (u << 4) | (Py_UCS4)hex_val(RD(pos + j));
            pos += 4;
            /* a high surrogate followed by an escaped low one is one astral character */
            if (u >= 0xd800 && u <= 0xdbff && pos + 6 <= end && RD(pos) == '\\' && RD(pos + 1) == 'u') {
                Py_UCS4 u2 = 0;
                for (int j = 0; j < 4; j++) u2 = (u2 << 4) | (Py_UCS4)hex_val(RD(pos + 2 + j));
                if (u2 >= 0xdc00 && u2 <= 0xdfff) {
                    u = 0x10000 + (((u - 0xd800) << 10) | (u2 - 0xdc00));
                    pos += 6;
                }
            }
            buf[out++] = u;
            break;
        }
        default: buf[out++] = c; /* '"', '\\', '/' */
        }
    }
    PyObject *r = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, out);
    PyMem_Free(buf);
    return r;
}

static PyObject *decode_key(PyObject *text, int kind, const void *data, const KeyEntry *e) {
    if (!e->escaped) return PyUnicode_Substring(text, e->start, e->start + e->len);
    if (kind == PyUnicode_1BYTE_KIND) return decode_key_impl(data, 1, e->start, e->len);
    if (kind == PyUnicode_2BYTE_KIND) return decode_key_impl(data, 2, e->start, e->len);
    return decode_key_impl(data, 4, e->start, e->len);
}

static PyObject *column(const void *p, Py_ssize_t n, size_t item) {
    return PyByteArray_FromStringAndSize((const char *)p, n * (Py_ssize_t)item);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *text, *max_obj;
    if (!PyArg_ParseTuple(args, "UO:scan", &text, &max_obj)) return NULL;
    if (!PyLong_Check(max_obj)) {
        PyErr_SetString(PyExc_TypeError, "scan: max_nodes must be an int");
        return NULL;
    }
    /* a budget beyond Py_ssize_t (a Limits value, not checked against memory) clips to its maximum */
    Py_ssize_t max_nodes = PyNumber_AsSsize_t(max_obj, NULL);
    if (max_nodes == -1 && PyErr_Occurred()) return NULL;
    if (max_nodes < 0) max_nodes = 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Scan s;
    memset(&s, 0, sizeof(s));
    s.max_nodes = max_nodes;
    int st;
    Py_BEGIN_ALLOW_THREADS
    st = ST_OK;
    /* a first allocation near the expected size (about one node per 8 characters), within max_nodes */
    Py_ssize_t guess = n / 8 + 16;
    if (guess > max_nodes) guess = max_nodes;
    if (guess > 64) st = reserve_nodes(&s, guess);
    if (st == ST_OK) {
        if (kind == PyUnicode_1BYTE_KIND)
            st = scan_ucs1(&s, data, n);
        else if (kind == PyUnicode_2BYTE_KIND)
            st = scan_ucs2(&s, data, n);
        else
            st = scan_ucs4(&s, data, n);
    }
    Py_END_ALLOW_THREADS
    if (st == ST_NOMEM) {
        scan_free(&s);
        return PyErr_NoMemory();
    }
    if (st != ST_OK) {
        scan_free(&s);
        Py_RETURN_NONE;
    }
    PyObject *keys = PyList_New(s.n_keys);
    if (keys == NULL) {
        scan_free(&s);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < s.n_keys; k++) {
        PyObject *key = decode_key(text, kind, data, &s.keys[k]);
        if (key == NULL) {
            Py_DECREF(keys);
            scan_free(&s);
            return NULL;
        }
        PyList_SET_ITEM(keys, k, key);
    }
    PyObject *r = PyTuple_New(8);
    if (r == NULL) {
        Py_DECREF(keys);
        scan_free(&s);
        return NULL;
    }
    PyTuple_SET_ITEM(r, 7, keys);
    /* the member nodes and their key ids, compacted from the key_id column */
    int64_t *members = (int64_t *)PyMem_Malloc((size_t)(s.n_members ? s.n_members : 1) * 2 * sizeof(int64_t));
    if (members == NULL) {
        Py_DECREF(r);
        scan_free(&s);
        return PyErr_NoMemory();
    }
    int64_t *member_key = members + s.n_members;
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < s.n && m < s.n_members; i++) {
        if (s.key_id[i] >= 0) {
            members[m] = i;
            member_key[m++] = s.key_id[i];
        }
    }
    const void *cols[7] = {s.kind, s.parent, s.start, s.end, s.index, members, member_key};
    for (int j = 0; j < 7; j++) {
        PyObject *col = column(cols[j], j < 5 ? s.n : s.n_members, j == 0 ? 1 : 8);
        if (col == NULL) {
            PyMem_Free(members);
            Py_DECREF(r);
            scan_free(&s);
            return NULL;
        }
        PyTuple_SET_ITEM(r, j, col);
    }
    PyMem_Free(members);
    scan_free(&s);
    return r;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(text, max_nodes) -> (kind, parent, start, end, index, members, member_key, keys) or None: the JSON "
     "tree's columns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_json", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_json(void) { return PyModule_Create(&module); }
