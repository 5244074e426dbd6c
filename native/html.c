/* structpos._native_html: the HTML table scanner of structpos/parsers/table_html.py, compiled.

   scan_tables(text, displayed_only, unescape) -> list of tables, or None

     Every top-level <table> of `text`, as structpos/parsers/table_html.py::_TableScanner (an
     html.parser.HTMLParser with convert_charrefs=True) finds it, in document order. Each table is
     a tuple (start, end, row_start, row_end, row_count, row_group, row_in_thead, cell_start,
     cell_end, cell_text, rowspan, colspan, is_th) of lists, offsets in code points. `unescape` is
     html.unescape, called on each character-data run that holds a '&' (so the entity rules are
     Python's own).

     The tokenizer reads a conservative subset of HTML on which every html.parser version agrees
     (3.11's, 3.12's, 3.13's and the 2025 versions with raw-text elements and foreign content):
     - start tags `<name attr attr=value attr="v" attr='v'>`: ASCII names of [A-Za-z0-9_:.-], ASCII
       whitespace before each attribute, an unquoted value of none of the characters "'=<>`/ and
       whitespace, `/>` only at the end; style, rowspan and colspan values without a '&' (versions
       unescape attribute values differently);
     - end tags `</name>`, ASCII whitespace allowed before the '>';
     - comments `<!-- ... -->` whose body holds no "--" before its end and does not open with '>'
       or "->"; `<!doctype ...>`, `<![ ... >` and `<? ... >` up to the next '>'; a '<' that opens
       nothing, as text;
     - <script>/<style> content up to the first plain `</script>`/`</style>` when no "</" followed
       by whitespace, no other "</script"/"</style", and (in a script) no "<!--" followed by
       "<script" (the standard's double escape) comes first; not self-closing, and not inside an
       open <svg>/<math> (foreign content: markup for newer versions);
     - title, textarea, xmp, iframe, noembed and noframes (raw text for newer versions) only when
       their content has no '<' up to their plain end tag, and, but in title and textarea (whose
       references newer versions decode as in text), no '&'; never <plaintext>.
     On anything else — and on a rowspan/colspan value that is not a plain number, which the Python
     path reports as an error — it returns None, and the caller runs the Python scanner, which
     gives the same tables (tests/test_html_native.py compares the two on generated and real
     pages).

   The GIL is held throughout: the scan builds Python objects as it goes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ints.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_UCS4 *v;
    Py_ssize_t n, cap;
} Chars;

static int reserve(Chars *a, Py_ssize_t more) {
    if (a->n + more <= a->cap) return 0;
    Py_ssize_t cap = a->cap ? a->cap : 64;
    while (cap < a->n + more) cap *= 2;
    Py_UCS4 *v = realloc(a->v, (size_t)cap * sizeof(Py_UCS4));
    if (!v) {
        PyErr_NoMemory();
        return -1;
    }
    a->v = v, a->cap = cap;
    return 0;
}

/* One <table> while it is scanned: finished rows and cells in columns, the open row and cell. */
typedef struct {
    int64_t start, end;
    int nested, group, in_thead;
    Ints row_start, row_end, row_count, row_group, row_thead;
    Ints cell_start, cell_end, rowspan, colspan, is_th;
    PyObject *cell_text; /* list */
    int row_open, row_thead_at_open;
    int64_t row_at, row_group_at_open, row_first_cell;
    int cell_open;
    Chars parts; /* the open cell's character data */
} Table;

#define TAG_MAX 64

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
    int displayed_only;
    PyObject *unescape;
    Table *tables;
    Py_ssize_t n_tables, cap_tables;
    Py_ssize_t *stack; /* indices of the open tables, innermost last */
    Py_ssize_t depth, cap_stack;
    char hidden_tag[TAG_MAX]; /* "" when no hidden element is open */
    int hidden_depth;
    int svg, math; /* <svg> and <math> elements open (start tags less their end tags) */
    int declined; /* the input leaves the subset: the caller runs the Python scanner */
} Scan;

#define AT(s, i) PyUnicode_READ((s)->kind, (s)->data, (i))
#define IS_WS(c) ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r' || (c) == '\f')
#define IS_ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define IS_NAME(c) (IS_ALPHA(c) || ((c) >= '0' && (c) <= '9') || (c) == '_' || (c) == ':' || (c) == '.' || (c) == '-')

static int in_set(const char *tag, const char *const *set) {
    for (; *set; set++)
        if (strcmp(tag, *set) == 0) return 1;
    return 0;
}

static const char *const VOID_TAGS[] = {"area", "base", "br", "col", "embed", "hr", "img", "input",
                                        "link", "meta", "source", "track", "wbr", NULL};
static const char *const INVISIBLE[] = {"style", "script", NULL};
static const char *const TABLE_TAGS[] = {"table", "thead", "tbody", "tfoot", "tr", "td", "th", NULL};
static const char *const SECTIONS[] = {"thead", "tbody", "tfoot", NULL};
/* elements whose content newer html.parser versions read as raw text (see the module comment) */
static const char *const RAW_TEXT[] = {"title", "textarea", "xmp", "iframe", "noembed", "noframes", NULL};

/* ------------------------------------------------------------------ text helpers */

static Py_ssize_t find_char(const Scan *s, Py_UCS4 ch, Py_ssize_t from) {
    for (Py_ssize_t i = from; i < s->n; i++)
        if (AT(s, i) == ch) return i;
    return -1;
}

/* Whether text[i:] starts with the ASCII `lit`, letters compared case-insensitively. */
static int starts_ci(const Scan *s, Py_ssize_t i, const char *lit) {
    for (; *lit; lit++, i++) {
        if (i >= s->n) return 0;
        Py_UCS4 c = AT(s, i);
        if (c >= 'A' && c <= 'Z') c += 32;
        if (c != (Py_UCS4)*lit) return 0;
    }
    return 1;
}

/* The ASCII name text[from:to] lowercased into out; 0, or -1 when it is too long to be one we track. */
static int lower_name(const Scan *s, Py_ssize_t from, Py_ssize_t to, char *out) {
    if (to - from >= TAG_MAX) return -1;
    for (Py_ssize_t i = from; i < to; i++) {
        Py_UCS4 c = AT(s, i);
        out[i - from] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    out[to - from] = '\0';
    return 0;
}

/* Whether text[from:to] holds a '&'. */
static int has_amp(const Scan *s, Py_ssize_t from, Py_ssize_t to) {
    for (Py_ssize_t i = from; i < to; i++)
        if (AT(s, i) == '&') return 1;
    return 0;
}

/* text[from:to] as a str, passed through html.unescape when it holds a '&'. */
static PyObject *decoded(const Scan *s, PyObject *text, Py_ssize_t from, Py_ssize_t to, int unescape) {
    PyObject *raw = PyUnicode_Substring(text, from, to);
    if (!raw || !unescape || !has_amp(s, from, to)) return raw;
    PyObject *out = PyObject_CallOneArg(s->unescape, raw);
    Py_DECREF(raw);
    if (out && !PyUnicode_Check(out)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "unescape must return a str");
        return NULL;
    }
    return out;
}

/* str.strip() bounds of text[s:e] (Unicode whitespace, as the Python scanner's _trimmed). */
static void trimmed(const Scan *s, int64_t *from, int64_t *to) {
    int64_t a = *from, b = *to;
    while (a < b && Py_UNICODE_ISSPACE(AT(s, a))) a++;
    if (a >= b) { /* empty or all whitespace: an empty span at the start */
        *to = *from;
        return;
    }
    while (b > a && Py_UNICODE_ISSPACE(AT(s, b - 1))) b--;
    *from = a, *to = b;
}

/* normalize_cell_text: strip, then each run of \r/\n, or of ≥ 2 whitespace characters, becomes
   one space (the regex [\r\n]+|\s{2,} tried left to right, its first branch first). */
static PyObject *normalized(const Chars *c) {
    Py_ssize_t a = 0, b = c->n;
    while (a < b && Py_UNICODE_ISSPACE(c->v[a])) a++;
    while (b > a && Py_UNICODE_ISSPACE(c->v[b - 1])) b--;
    Py_UCS4 *out = PyMem_Malloc((size_t)(b - a + 1) * sizeof(Py_UCS4));
    if (!out) return PyErr_NoMemory();
    Py_ssize_t m = 0;
    for (Py_ssize_t i = a; i < b;) {
        Py_UCS4 ch = c->v[i];
        if (ch == '\r' || ch == '\n') {
            while (i < b && (c->v[i] == '\r' || c->v[i] == '\n')) i++;
            out[m++] = ' ';
        } else if (Py_UNICODE_ISSPACE(ch) && i + 1 < b && Py_UNICODE_ISSPACE(c->v[i + 1])) {
            while (i < b && Py_UNICODE_ISSPACE(c->v[i])) i++;
            out[m++] = ' ';
        } else
            out[m++] = ch, i++;
    }
    PyObject *r = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, m);
    PyMem_Free(out);
    return r;
}

/* ------------------------------------------------------------------ the table model */

static Table *top(Scan *s) { return s->depth ? &s->tables[s->stack[s->depth - 1]] : NULL; }

static int close_cell(Scan *s, Table *t, int64_t pos) {
    if (!t->cell_open) return 0;
    s->hidden_tag[0] = '\0', s->hidden_depth = 0; /* a hidden element left open ends with its cell */
    Py_ssize_t k = t->cell_start.n - 1;
    int64_t a = t->cell_start.v[k], b = pos;
    trimmed(s, &a, &b);
    t->cell_start.v[k] = a, t->cell_end.v[k] = b;
    PyObject *text = normalized(&t->parts);
    if (!text) return -1;
    PyList_SET_ITEM(t->cell_text, k, text); /* the slot held None */
    Py_DECREF(Py_None);
    t->cell_open = 0, t->parts.n = 0;
    return 0;
}

static int close_row(Scan *s, Table *t, int64_t pos, int64_t end) {
    if (close_cell(s, t, pos) < 0) return -1;
    if (!t->row_open) return 0;
    if (end < 0) { /* implicit end: up to the last non-space character before pos */
        int64_t a = t->row_at;
        end = pos;
        trimmed(s, &a, &end);
    }
    t->row_open = 0;
    if (push(&t->row_start, t->row_at) || push(&t->row_end, end) ||
        push(&t->row_count, t->cell_start.n - t->row_first_cell) || push(&t->row_group, t->row_group_at_open) ||
        push(&t->row_thead, t->row_thead_at_open))
        return -1;
    return 0;
}

static void open_row(Table *t, int64_t pos) {
    t->row_open = 1, t->row_at = pos, t->row_group_at_open = t->group, t->row_thead_at_open = t->in_thead;
    t->row_first_cell = t->cell_start.n;
}

static int open_table(Scan *s, int64_t pos) {
    if (s->n_tables == s->cap_tables) {
        Py_ssize_t cap = s->cap_tables ? 2 * s->cap_tables : 4;
        Table *v = realloc(s->tables, (size_t)cap * sizeof(Table));
        if (!v) goto nomem;
        s->tables = v, s->cap_tables = cap;
    }
    if (s->depth == s->cap_stack) {
        Py_ssize_t cap = s->cap_stack ? 2 * s->cap_stack : 4;
        Py_ssize_t *v = realloc(s->stack, (size_t)cap * sizeof(Py_ssize_t));
        if (!v) goto nomem;
        s->stack = v, s->cap_stack = cap;
    }
    Table *t = &s->tables[s->n_tables];
    memset(t, 0, sizeof(Table));
    t->cell_text = PyList_New(0);
    if (!t->cell_text) return -1;
    t->start = pos, t->end = -1, t->nested = s->depth > 0;
    s->stack[s->depth++] = s->n_tables++;
    return 0;
nomem:
    PyErr_NoMemory();
    return -1;
}

/* check_span_value for a plain value: ASCII digits between ASCII whitespace; else -2, declined (the
   Python path words the error; versions unescape a '&' in a value differently). */
static long span_value(const Scan *s, Py_ssize_t from, Py_ssize_t to, int is_colspan) {
    while (from < to && IS_WS(AT(s, from))) from++;
    while (to > from && IS_WS(AT(s, to - 1))) to--;
    if (from == to) return -2;
    long value = 0;
    for (Py_ssize_t i = from; i < to; i++) {
        Py_UCS4 c = AT(s, i);
        if (c < '0' || c > '9') return -2; /* '&', non-ASCII, anything but digits */
        if (value < 100000000) value = value * 10 + (long)(c - '0');
    }
    if (is_colspan) return value < 1 ? 1 : value > 1000 ? 1000 : value;
    return value > 65534 ? 65534 : value;
}

/* The start tag's attributes we read: the last value of each, a range of text (from < 0: absent or
   without a value, which read alike: no style, a span of 1). */
typedef struct {
    Py_ssize_t style[2], rowspan[2], colspan[2];
} Attrs;

/* Whether the style value says display:none (spaces dropped, lowercased); -2 declines on non-ASCII or '&'. */
static int hides(const Scan *s, const Attrs *at) {
    Py_ssize_t from = at->style[0], to = at->style[1], m = 0;
    if (from < 0) return 0;
    char *buf = PyMem_Malloc((size_t)(to - from) + 1);
    if (!buf) {
        PyErr_NoMemory();
        return -1;
    }
    int r = 0;
    for (Py_ssize_t i = from; i < to && r == 0; i++) {
        Py_UCS4 c = AT(s, i);
        if (c == '&' || c > 127)
            r = -2;
        else if (c != ' ')
            buf[m++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    buf[m] = '\0';
    if (r == 0) r = strstr(buf, "display:none") != NULL;
    PyMem_Free(buf);
    return r;
}

/* Whether some open table has an open cell (character data goes to every such cell). */
static int in_cell(const Scan *s) {
    for (Py_ssize_t d = 0; d < s->depth; d++)
        if (s->tables[s->stack[d]].cell_open) return 1;
    return 0;
}

/* Append v[0:m] to the character data of every open cell (the Python scanner's cell_parts). */
static int append_to_cells(Scan *s, const Py_UCS4 *v, Py_ssize_t m) {
    for (Py_ssize_t d = 0; d < s->depth; d++) {
        Table *t = &s->tables[s->stack[d]];
        if (!t->cell_open) continue;
        if (reserve(&t->parts, m) < 0) return -1;
        memcpy(t->parts.v + t->parts.n, v, (size_t)m * sizeof(Py_UCS4));
        t->parts.n += m;
    }
    return 0;
}

/* handle_data: text[from:to] (decoded when `unescape`) into the open cells, unless hidden. */
static int data(Scan *s, PyObject *text, Py_ssize_t from, Py_ssize_t to, int unescape) {
    if (from >= to || s->hidden_tag[0] || !in_cell(s)) return 0;
    PyObject *chunk = decoded(s, text, from, to, unescape);
    if (!chunk) return -1;
    Py_UCS4 *v = PyUnicode_AsUCS4Copy(chunk);
    int r = v ? append_to_cells(s, v, PyUnicode_GET_LENGTH(chunk)) : -1;
    PyMem_Free(v);
    Py_DECREF(chunk);
    return r;
}

static int start_tag(Scan *s, const char *tag, const Attrs *at, int64_t pos, int64_t content) {
    /* _track_hidden */
    if (s->hidden_tag[0]) {
        if (strcmp(tag, s->hidden_tag) == 0) s->hidden_depth++;
    } else if (s->displayed_only && !in_set(tag, VOID_TAGS)) {
        int h = in_set(tag, INVISIBLE);
        if (!h) {
            h = hides(s, at);
            if (h == -2) return s->declined = 1, 0;
            if (h < 0) return -1;
        }
        if (h) strcpy(s->hidden_tag, tag), s->hidden_depth = 1;
    }
    if (!in_set(tag, TABLE_TAGS)) {
        static const Py_UCS4 newline = '\n';
        if (strcmp(tag, "br") == 0 && !s->hidden_tag[0]) return append_to_cells(s, &newline, 1);
        return 0;
    }
    if (strcmp(tag, "table") == 0) return open_table(s, pos);
    Table *t = top(s);
    if (!t) return 0;
    if (in_set(tag, SECTIONS)) {
        if (close_row(s, t, pos, -1) < 0) return -1;
        t->group++, t->in_thead = strcmp(tag, "thead") == 0;
    } else if (strcmp(tag, "tr") == 0) {
        if (close_row(s, t, pos, -1) < 0) return -1;
        open_row(t, pos);
    } else { /* td, th */
        if (!t->row_open) open_row(t, pos); /* a cell outside <tr>: an implicit row */
        if (close_cell(s, t, pos) < 0) return -1;
        long rowspan = 1, colspan = 1;
        if (at->rowspan[0] >= 0) rowspan = span_value(s, at->rowspan[0], at->rowspan[1], 0);
        if (at->colspan[0] >= 0) colspan = span_value(s, at->colspan[0], at->colspan[1], 1);
        if (rowspan < 0 || colspan < 0) return s->declined = 1, 0;
        if (push(&t->cell_start, content) || push(&t->cell_end, -1) || push(&t->rowspan, rowspan) ||
            push(&t->colspan, colspan) || push(&t->is_th, strcmp(tag, "th") == 0))
            return -1;
        if (PyList_Append(t->cell_text, Py_None) < 0) return -1;
        t->cell_open = 1, t->parts.n = 0;
    }
    return 0;
}

static int end_tag(Scan *s, const char *tag, int64_t pos) {
    if (s->hidden_tag[0] && strcmp(s->hidden_tag, tag) == 0 && --s->hidden_depth == 0) s->hidden_tag[0] = '\0';
    Table *t = top(s);
    if (!t || !in_set(tag, TABLE_TAGS)) return 0;
    if (strcmp(tag, "table") == 0) {
        if (close_row(s, t, pos, -1) < 0) return -1;
        Py_ssize_t gt = find_char(s, '>', pos);
        t->end = gt < 0 ? s->n : gt + 1;
        s->depth--;
    } else if (in_set(tag, SECTIONS)) {
        if (close_row(s, t, pos, -1) < 0) return -1;
        t->group++, t->in_thead = 0;
    } else if (strcmp(tag, "tr") == 0) {
        if (t->row_open) {
            Py_ssize_t gt = find_char(s, '>', pos);
            if (close_row(s, t, pos, gt < 0 ? s->n : gt + 1) < 0) return -1;
        }
    } else if (close_cell(s, t, pos) < 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ the tokenizer */

#define DECLINE (-2)

/* The content of a <script>/<style> from `from`: the index of its `</name>`, or DECLINE. */
static Py_ssize_t cdata_end(const Scan *s, Py_ssize_t from, const char *name) {
    int escaped = 0; /* a "<!--" seen: a later "<script" would hide the end tag from newer versions */
    for (Py_ssize_t i = from; i + 1 < s->n; i++) {
        if (AT(s, i) != '<') continue;
        Py_UCS4 c = AT(s, i + 1);
        if (strcmp(name, "script") == 0) {
            if (c == '!' && starts_ci(s, i, "<!--")) escaped = 1;
            if (escaped && starts_ci(s, i, "<script")) return DECLINE;
        }
        if (c != '/') continue;
        if (i + 2 >= s->n) return DECLINE;
        Py_UCS4 d = AT(s, i + 2);
        if (Py_UNICODE_ISSPACE(d)) return DECLINE; /* "</ name": versions differ */
        if (starts_ci(s, i + 2, name)) {
            Py_ssize_t after = i + 2 + (Py_ssize_t)strlen(name);
            return after < s->n && AT(s, after) == '>' ? i : DECLINE;
        }
    }
    return DECLINE;
}

/* A raw-text element's content (see the module comment): the index of its plain end tag, or DECLINE.
   Newer versions decode references in <title> and <textarea> as in text, not in the others. */
static Py_ssize_t raw_text_end(const Scan *s, Py_ssize_t from, const char *name) {
    int decoded = strcmp(name, "title") == 0 || strcmp(name, "textarea") == 0;
    for (Py_ssize_t i = from; i < s->n; i++) {
        Py_UCS4 c = AT(s, i);
        if (c == '&' && !decoded) return DECLINE;
        if (c == '<') {
            Py_ssize_t after = i + 2 + (Py_ssize_t)strlen(name);
            int plain = i + 1 < s->n && AT(s, i + 1) == '/' && starts_ci(s, i + 2, name) && after < s->n &&
                        AT(s, after) == '>';
            return plain ? i : DECLINE;
        }
    }
    return DECLINE;
}

/* The start tag at i: the index after it, DECLINE, or -1 on a Python error. */
static Py_ssize_t scan_start_tag(Scan *s, PyObject *text, Py_ssize_t i) {
    Py_ssize_t p = i + 1, n = s->n;
    while (p < n && IS_NAME(AT(s, p))) p++;
    char tag[TAG_MAX];
    if (p >= n || lower_name(s, i + 1, p, tag) < 0) return DECLINE;
    Attrs at = {{-1, -1}, {-1, -1}, {-1, -1}};
    int self_closing = 0;
    for (;;) {
        Py_ssize_t before = p;
        while (p < n && IS_WS(AT(s, p))) p++;
        if (p >= n) return DECLINE;
        Py_UCS4 c = AT(s, p);
        if (c == '>') {
            p++;
            break;
        }
        if (c == '/') {
            if (p + 1 < n && AT(s, p + 1) == '>') {
                p += 2, self_closing = 1;
                break;
            }
            return DECLINE;
        }
        if (p == before || !IS_NAME(c)) return DECLINE; /* an attribute must follow whitespace */
        Py_ssize_t name_at = p;
        while (p < n && IS_NAME(AT(s, p))) p++;
        char attr[TAG_MAX];
        int tracked = lower_name(s, name_at, p, attr) == 0;
        Py_ssize_t after_name = p, v0 = -1, v1 = -1;
        while (p < n && IS_WS(AT(s, p))) p++;
        if (p < n && AT(s, p) == '=') {
            p++;
            while (p < n && IS_WS(AT(s, p))) p++;
            if (p >= n) return DECLINE;
            Py_UCS4 q = AT(s, p);
            if (q == '"' || q == '\'') {
                Py_ssize_t close = find_char(s, q, p + 1);
                if (close < 0) return DECLINE;
                v0 = p + 1, v1 = close, p = close + 1;
            } else {
                v0 = p;
                for (; p < n; p++) {
                    Py_UCS4 b = AT(s, p);
                    if (IS_WS(b) || b == '>') break;
                    if (b == '"' || b == '\'' || b == '=' || b == '<' || b == '`' || b == '/' || Py_UNICODE_ISSPACE(b))
                        return DECLINE;
                }
                if (p == v0) return DECLINE;
                v1 = p;
            }
        } else
            p = after_name; /* no value: the whitespace is read again before the next attribute */
        if (!tracked) continue;
        Py_ssize_t *range = strcmp(attr, "style") == 0     ? at.style
                            : strcmp(attr, "rowspan") == 0 ? at.rowspan
                            : strcmp(attr, "colspan") == 0 ? at.colspan
                                                           : NULL;
        if (range) range[0] = v0, range[1] = v1;
    }
    /* newer versions may read <script/> or <title/> as opening raw text, as the HTML standard does */
    if (self_closing && (in_set(tag, INVISIBLE) || in_set(tag, RAW_TEXT))) return DECLINE;
    if (strcmp(tag, "plaintext") == 0) return DECLINE; /* some versions read the rest of the input as text */
    if (start_tag(s, tag, &at, i, p) < 0) return -1;
    if (s->declined) return DECLINE;
    if (self_closing) return end_tag(s, tag, i) < 0 ? -1 : p;
    s->svg += strcmp(tag, "svg") == 0, s->math += strcmp(tag, "math") == 0;
    if (in_set(tag, INVISIBLE)) {
        if (s->svg || s->math) return DECLINE; /* newer versions read it as markup inside <svg>/<math> */
        Py_ssize_t e = cdata_end(s, p, tag);
        if (e == DECLINE) return DECLINE;
        if (data(s, text, p, e, 0) < 0 || end_tag(s, tag, e) < 0) return -1;
        return e + 3 + (Py_ssize_t)strlen(tag);
    }
    if (in_set(tag, RAW_TEXT) && raw_text_end(s, p, tag) == DECLINE) return DECLINE;
    return p;
}

/* The end tag at i: the index after it, DECLINE, or -1 on a Python error. */
static Py_ssize_t scan_end_tag(Scan *s, Py_ssize_t i) {
    Py_ssize_t p = i + 2, n = s->n;
    if (p >= n || !IS_ALPHA(AT(s, p))) return DECLINE;
    while (p < n && IS_NAME(AT(s, p))) p++;
    char tag[TAG_MAX];
    if (lower_name(s, i + 2, p, tag) < 0) return DECLINE;
    while (p < n && IS_WS(AT(s, p))) p++;
    if (p >= n || AT(s, p) != '>') return DECLINE;
    if (s->svg && strcmp(tag, "svg") == 0) s->svg--;
    if (s->math && strcmp(tag, "math") == 0) s->math--;
    return end_tag(s, tag, i) < 0 ? -1 : p + 1;
}

/* `<!...`, `<?...`: the index after it, or DECLINE. */
static Py_ssize_t scan_markup(const Scan *s, Py_ssize_t i) {
    if (starts_ci(s, i, "<!--")) {
        if (starts_ci(s, i + 4, ">") || starts_ci(s, i + 4, "->")) return DECLINE;
        for (Py_ssize_t p = i + 4; p + 1 < s->n; p++)
            if (AT(s, p) == '-' && AT(s, p + 1) == '-')
                return p + 2 < s->n && AT(s, p + 2) == '>' ? p + 3 : DECLINE;
        return DECLINE;
    }
    Py_ssize_t from;
    if (starts_ci(s, i, "<?") || starts_ci(s, i, "<!["))
        from = i + 2;
    else if (starts_ci(s, i, "<!doctype"))
        from = i + 9;
    else
        return DECLINE;
    Py_ssize_t gt = find_char(s, '>', from);
    return gt < 0 ? DECLINE : gt + 1;
}

static int tokenize(Scan *s, PyObject *text) {
    Py_ssize_t i = 0, n = s->n;
    while (i < n) {
        Py_ssize_t j = find_char(s, '<', i);
        if (j < 0) j = n;
        if (data(s, text, i, j, 1) < 0) return -1;
        if ((i = j) >= n) break;
        Py_UCS4 c = i + 1 < n ? AT(s, i + 1) : 0;
        Py_ssize_t k;
        if (IS_ALPHA(c))
            k = scan_start_tag(s, text, i);
        else if (c == '/')
            k = scan_end_tag(s, i);
        else if (c == '!' || c == '?')
            k = scan_markup(s, i);
        else { /* a '<' that opens nothing is text on its own */
            if (data(s, text, i, i + 1, 1) < 0) return -1;
            k = i + 1;
        }
        if (k == -1) return -1;
        if (k == DECLINE) {
            s->declined = 1;
            return 0;
        }
        i = k;
    }
    /* unclosed tables end with the input, innermost first */
    while (s->depth) {
        Table *t = top(s);
        if (close_row(s, t, n, -1) < 0) return -1;
        t->end = n;
        s->depth--;
    }
    return 0;
}

/* ------------------------------------------------------------------ results */

static PyObject *int_list(const Ints *a, int as_bool) {
    PyObject *out = PyList_New(a->n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < a->n; i++) {
        PyObject *v = as_bool ? PyBool_FromLong((long)a->v[i]) : PyLong_FromLongLong(a->v[i]);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *table_tuple(Table *t) {
    const Ints *cols[] = {&t->row_start, &t->row_end, &t->row_count, &t->row_group, &t->row_thead,
                          &t->cell_start, &t->cell_end, NULL, &t->rowspan, &t->colspan, &t->is_th};
    PyObject *out = PyTuple_New(13);
    if (!out) return NULL;
    PyObject *v;
    if (!(v = PyLong_FromLongLong(t->start))) goto fail;
    PyTuple_SET_ITEM(out, 0, v);
    if (!(v = PyLong_FromLongLong(t->end))) goto fail;
    PyTuple_SET_ITEM(out, 1, v);
    for (int k = 0; k < 11; k++) {
        if (cols[k])
            v = int_list(cols[k], k == 4 || k == 10);
        else
            v = t->cell_text, Py_INCREF(v);
        if (!v) goto fail;
        PyTuple_SET_ITEM(out, 2 + k, v);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static void free_table(Table *t) {
    Ints *all[] = {&t->row_start, &t->row_end, &t->row_count, &t->row_group, &t->row_thead,
                   &t->cell_start, &t->cell_end, &t->rowspan, &t->colspan, &t->is_th};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) free(all[k]->v);
    free(t->parts.v);
    Py_XDECREF(t->cell_text);
}

static PyObject *scan_tables(PyObject *self, PyObject *args) {
    PyObject *text, *unescape;
    int displayed_only;
    if (!PyArg_ParseTuple(args, "UpO:scan_tables", &text, &displayed_only, &unescape)) return NULL;
    Scan s;
    memset(&s, 0, sizeof s);
    s.kind = PyUnicode_KIND(text), s.data = PyUnicode_DATA(text), s.n = PyUnicode_GET_LENGTH(text);
    s.displayed_only = displayed_only, s.unescape = unescape;
    PyObject *result = NULL;
    if (tokenize(&s, text) < 0) goto done;
    if (s.declined) {
        result = Py_None, Py_INCREF(result);
        goto done;
    }
    if (!(result = PyList_New(0))) goto done;
    for (Py_ssize_t k = 0; k < s.n_tables; k++) {
        if (s.tables[k].nested) continue;
        PyObject *t = table_tuple(&s.tables[k]);
        if (!t || PyList_Append(result, t) < 0) {
            Py_XDECREF(t);
            Py_CLEAR(result);
            goto done;
        }
        Py_DECREF(t);
    }
done:
    for (Py_ssize_t k = 0; k < s.n_tables; k++) free_table(&s.tables[k]);
    free(s.tables);
    free(s.stack);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_tables", scan_tables, METH_VARARGS, "The top-level tables of an HTML text (see the module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_html", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_html(void) { return PyModule_Create(&module); }
