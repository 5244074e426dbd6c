/* structpos._native_code: tree-sitter parse + preorder cursor walk in C (see structpos/parsers/code.py).
 *
 * Built with the vendored tree-sitter runtime (native/vendor/tree_sitter, MIT, the runtime py-tree-sitter
 * 0.26.1 ships), because py-tree-sitter exports no C symbols to walk its Tree with. The grammar wheels'
 * language() capsules ("tree_sitter.Language") carry a TSLanguage* that this runtime reads directly.
 *
 * parse_walk returns the same columns as code.py::_walk/_tree_columns, as bytearrays of int64 (uint8 for
 * the MISSING flags) that Python views with np.frombuffer. The parse and the walk run without the GIL:
 * they touch only C memory (the input bytes are pinned by a Py_buffer held for the call; the column
 * bytearrays are made between the two, with the GIL, and published only after the walk).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tree_sitter/api.h"
/* the runtime in this translation unit: its cursor and node calls inline into the walk */
#include "lib.c"
/* the runtime's allocations go to a per-call arena (ts_set_allocator at import) */
#include "arena.h"

#define CAPSULE_NAME "tree_sitter.Language"

static const TSLanguage *language_of(PyObject *capsule) {
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "language must be a tree_sitter.Language capsule, not %.100s",
                     Py_TYPE(capsule)->tp_name);
        return NULL;
    }
    const TSLanguage *lang = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    if (lang == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "language capsule holds NULL");
    return lang;
}

static int abi_supported(const TSLanguage *lang) {
    uint32_t abi = ts_language_abi_version(lang);
    return abi >= TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION && abi <= TREE_SITTER_LANGUAGE_VERSION;
}

/* language_info(capsule) -> (pointer as int, abi version, supported by this runtime) */
static PyObject *language_info(PyObject *self, PyObject *capsule) {
    const TSLanguage *lang = language_of(capsule);
    if (lang == NULL) return NULL;
    return Py_BuildValue("(NIO)", PyLong_FromVoidPtr((void *)lang), (unsigned int)ts_language_abi_version(lang),
                         abi_supported(lang) ? Py_True : Py_False);
}

/* ------------------------------------------------------------------ the timed parse */
typedef struct {
    struct timespec at;
} Deadline;

static bool past_deadline(TSParseState *state) {
    const Deadline *d = state->payload;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > d->at.tv_sec || (now.tv_sec == d->at.tv_sec && now.tv_nsec > d->at.tv_nsec);
}

typedef struct {
    const char *data;
    uint32_t size;
} Source;

static const char *read_source(void *payload, uint32_t byte_index, TSPoint position, uint32_t *bytes_read) {
    (void)position;
    const Source *src = payload;
    if (byte_index >= src->size) {
        *bytes_read = 0;
        return "";
    }
    *bytes_read = src->size - byte_index;
    return src->data + byte_index;
}

/* ------------------------------------------------------------------ the walk */
/* The columns are bytearrays made before the walk (with the GIL) and written by it (without): no copy after. */
enum { COL_KINDS, COL_STARTS, COL_ENDS, COL_PARENTS, COL_FIELDS, COL_MISSING, N_COLUMNS };

typedef struct {
    int64_t *kinds, *starts, *ends, *parents, *field_ids, *stack;
    uint8_t *missing;
    int64_t cap, n;
    PyObject *columns[N_COLUMNS]; /* bytearrays: the unused ones (no fields, no MISSING flags) empty */
} Walk;

/* Needs the GIL. */
static void walk_free(Walk *w) {
    for (int c = 0; c < N_COLUMNS; c++) Py_CLEAR(w->columns[c]);
    free(w->stack);
    w->stack = NULL;
}

static void *new_column(Walk *w, int c, int used, int64_t cap, size_t itemsize) {
    w->columns[c] = PyByteArray_FromStringAndSize(NULL, used ? (Py_ssize_t)(cap * (int64_t)itemsize) : 0);
    return w->columns[c] == NULL || !used ? NULL : PyByteArray_AS_STRING(w->columns[c]);
}

/* Needs the GIL. 0: done; -1: out of memory (a Python error set). */
static int walk_alloc(Walk *w, int64_t cap, int fields, int missing) {
    w->cap = cap;
    w->n = 0;
    w->kinds = new_column(w, COL_KINDS, 1, cap, 8);
    w->starts = new_column(w, COL_STARTS, 1, cap, 8);
    w->ends = new_column(w, COL_ENDS, 1, cap, 8);
    w->parents = new_column(w, COL_PARENTS, 1, cap, 8);
    w->field_ids = new_column(w, COL_FIELDS, fields, cap, 8);
    w->missing = new_column(w, COL_MISSING, missing, cap, 1);
    for (int c = 0; c < N_COLUMNS; c++)
        if (w->columns[c] == NULL) return -1;
    w->stack = malloc((size_t)(cap > 0 ? cap : 1) * sizeof(int64_t));
    if (w->stack == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Needs the GIL. The columns cut to the n nodes walked (named_only walks fewer than it allocated). */
static int walk_trim(Walk *w) {
    const size_t itemsize[N_COLUMNS] = {8, 8, 8, 8, 8, 1};
    for (int c = 0; c < N_COLUMNS; c++) {
        if (PyByteArray_GET_SIZE(w->columns[c]) == 0) continue;
        if (PyByteArray_Resize(w->columns[c], (Py_ssize_t)(w->n * (int64_t)itemsize[c])) < 0) return -1;
    }
    return 0;
}

/* The preorder walk of code.py::_walk: a dropped node's children hang from its nearest kept ancestor.
 * walk_tree and walk_subtrees return 0: done; -1: out of memory; -2: more nodes than descendant_count
 * (never expected). */
static int walk_tree(Walk *w, TSTree *tree, const TSLanguage *lang, int named_only, int fields, int missing) {
    uint32_t symbol_count = ts_language_symbol_count(lang);
    TSTreeCursor cur = ts_tree_cursor_new(ts_tree_root_node(tree));
    int64_t top = -1, sp = 0;
    int rc = 0;
    for (;;) {
        TSNode node = ts_tree_cursor_current_node(&cur);
        TSSymbol kid = ts_node_symbol(node);
        int keep = !named_only || kid >= symbol_count || ts_language_symbol_type(lang, kid) == TSSymbolTypeRegular;
        int descend;
        if (keep) {
            if (w->n >= w->cap) {
                rc = -2;
                break;
            }
            int64_t i = w->n++;
            w->kinds[i] = kid;
            w->starts[i] = ts_node_start_byte(node);
            w->ends[i] = ts_node_end_byte(node);
            w->parents[i] = top;
            if (fields) w->field_ids[i] = ts_tree_cursor_current_field_id(&cur);
            if (missing) w->missing[i] = ts_node_is_missing(node);
            descend = ts_tree_cursor_goto_first_child(&cur);
            if (descend) {
                if (sp >= w->cap) {
                    rc = -2;
                    break;
                }
                w->stack[sp++] = top;
                top = i;
                continue;
            }
        } else if (ts_tree_cursor_goto_first_child(&cur)) {
            if (sp >= w->cap) {
                rc = -2;
                break;
            }
            w->stack[sp++] = top;
            continue;
        }
        int done = 0;
        while (!ts_tree_cursor_goto_next_sibling(&cur)) {
            if (!ts_tree_cursor_goto_parent(&cur) || sp == 0) {
                done = 1;
                break;
            }
            top = w->stack[--sp];
        }
        if (done) break;
    }
    ts_tree_cursor_delete(&cur);
    return rc;
}

/* The same walk straight over the runtime's subtrees (no cursor), for walks without fields: a hidden
 * subtree is transparent, its visible descendants hang from the nearest emitted ancestor. Visibility,
 * aliases and positions follow tree_cursor.c (ts_tree_cursor_child_iterator_next,
 * ts_tree_cursor_current_node): a child starts where the previous one ends plus its own padding (the first
 * where its parent starts), a non-extra child takes its parent production's alias and is visible when it
 * has one. The frames live in a growable heap array (no C recursion), so the depth is unbounded. */
typedef struct {
    Subtree tree;
    const TSSymbol *aliases;
    uint32_t child, structural, pos;
    int64_t out_parent;
} Frame;

static int push_frame(Frame **frames, int64_t *cap, int64_t *sp, Subtree tree, const TSLanguage *lang, uint32_t pos,
                      int64_t out_parent) {
    if (*sp >= *cap) {
        int64_t grown = *cap * 2 + 16;
        Frame *f = realloc(*frames, (size_t)grown * sizeof(Frame));
        if (f == NULL) return -1;
        *frames = f;
        *cap = grown;
    }
    (*frames)[(*sp)++] = (Frame){tree, ts_language_alias_sequence(lang, tree.ptr->production_id), 0, 0, pos, out_parent};
    return 0;
}

static int walk_subtrees(Walk *w, TSTree *tree, const TSLanguage *lang, int named_only, int missing) {
    uint32_t symbol_count = ts_language_symbol_count(lang);
    Subtree root = tree->root;
    Frame *frames = NULL;
    int64_t cap = 0, sp = 0;
    int rc = 0;
    uint32_t start = ts_subtree_padding(root).bytes;
    TSSymbol kid = ts_language_public_symbol(lang, ts_subtree_symbol(root));
    int keep = !named_only || kid >= symbol_count || ts_language_symbol_type(lang, kid) == TSSymbolTypeRegular;
    int64_t top = -1;
    if (keep) {
        if (w->cap < 1) return -2;
        w->kinds[0] = kid;
        w->starts[0] = start;
        w->ends[0] = start + ts_subtree_size(root).bytes;
        w->parents[0] = -1;
        if (missing) w->missing[0] = ts_subtree_missing(root);
        w->n = 1;
        top = 0;
    }
    if (ts_subtree_child_count(root) > 0 && push_frame(&frames, &cap, &sp, root, lang, start, top)) rc = -1;
    while (rc == 0 && sp > 0) {
        Frame *f = &frames[sp - 1];
        if (f->child == f->tree.ptr->child_count) {
            sp--;
            continue;
        }
        Subtree child = ts_subtree_children(f->tree)[f->child];
        if (f->child > 0) f->pos += ts_subtree_padding(child).bytes;
        uint32_t at = f->pos;
        f->pos += ts_subtree_size(child).bytes;
        f->child++;
        TSSymbol alias = 0;
        if (!ts_subtree_extra(child)) {
            if (f->aliases) alias = f->aliases[f->structural];
            f->structural++;
        }
        int64_t parent = f->out_parent;
        if (ts_subtree_visible(child) || alias) {
            kid = ts_language_public_symbol(lang, alias ? alias : ts_subtree_symbol(child));
            if (!named_only || kid >= symbol_count || ts_language_symbol_type(lang, kid) == TSSymbolTypeRegular) {
                if (w->n >= w->cap) {
                    rc = -2;
                    break;
                }
                int64_t i = w->n++;
                w->kinds[i] = kid;
                w->starts[i] = at;
                w->ends[i] = at + ts_subtree_size(child).bytes;
                w->parents[i] = parent;
                if (missing) w->missing[i] = ts_subtree_missing(child);
                parent = i;
            }
        }
        if (ts_subtree_child_count(child) > 0 && push_frame(&frames, &cap, &sp, child, lang, at, parent)) rc = -1;
    }
    free(frames);
    return rc;
}

/* blocks the last call on this thread left to arena_end (its tree's), for the tests: arena_left() */
static _Thread_local long long last_left = 0;

static PyObject *arena_left(PyObject *self, PyObject *unused) { return PyLong_FromLongLong(last_left); }

/* arena_exercise(small, large, size) -> blocks arena_end released: one call's worth of the runtime's allocation
 * pattern, for the tests: small and large blocks (large ones of `size` bytes, grown by realloc) made through
 * the runtime's allocator, every third freed in the call, the rest left to arena_end. */
static PyObject *arena_exercise(PyObject *self, PyObject *args) {
    int small, large;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "iin:arena_exercise", &small, &large, &size)) return NULL;
    if (small < 0 || large < 0 || size <= ARENA_SMALL || size > (1 << 24)) {
        PyErr_SetString(PyExc_ValueError, "arena_exercise: counts >= 0, ARENA_SMALL < size <= 16 MiB");
        return NULL;
    }
    arena_begin();
    for (int i = 0; i < small; i++) {
        void *p = ts_malloc((size_t)(i % ARENA_SMALL) + 1);
        if (i % 3 == 0) ts_free(p);
    }
    for (int i = 0; i < large; i++) {
        void *p = ts_malloc((size_t)size);
        memset(p, 1, (size_t)size);
        p = ts_realloc(p, (size_t)size * 2);
        if (i % 3 == 0) ts_free(p);
    }
    return PyLong_FromLongLong(arena_end());
}

/* parse_walk(capsule, data, named_only, fields, max_nodes, timeout_micros)
 *   -> None (the parse ran past timeout_micros and was cancelled)
 *   -> (has_error, nodes, kinds, starts, ends, parents, field_ids, missing)
 * max_nodes < 0 / timeout_micros < 0: none. Without named_only a tree of more than max_nodes nodes is not
 * walked: the columns are None (the caller raises the limit error, as the pure path does). */
static PyObject *parse_walk(PyObject *self, PyObject *args) {
    PyObject *capsule;
    Py_buffer buf;
    int named_only, fields;
    long long max_nodes, timeout_micros;
    if (!PyArg_ParseTuple(args, "Oy*ppLL:parse_walk", &capsule, &buf, &named_only, &fields, &max_nodes,
                          &timeout_micros))
        return NULL;
    PyObject *result = NULL;
    TSParser *parser = NULL;
    TSTree *tree = NULL;
    Walk w;
    memset(&w, 0, sizeof w);
    int set_ok = 0, walk_rc = 0, walked = 0, has_error = 0;
    int64_t left = 0;
    int64_t count = 0;
    const TSLanguage *lang = language_of(capsule);
    if (lang == NULL) goto release_buffer;
    if (!abi_supported(lang)) {
        PyErr_Format(PyExc_ValueError, "tree-sitter language ABI %u is outside %d..%d", ts_language_abi_version(lang),
                     TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION, TREE_SITTER_LANGUAGE_VERSION);
        goto release_buffer;
    }
    if (buf.len > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "tree-sitter reads at most 4 GiB");
        goto release_buffer;
    }

    Py_BEGIN_ALLOW_THREADS;
    arena_begin();
    parser = ts_parser_new();
    set_ok = parser != NULL && ts_parser_set_language(parser, lang);
    if (set_ok) {
        Source src = {buf.buf, (uint32_t)buf.len};
        if (timeout_micros < 0) {
            tree = ts_parser_parse_string(parser, NULL, src.data, src.size);
        } else {
            Deadline d;
            clock_gettime(CLOCK_MONOTONIC, &d.at);
            d.at.tv_sec += (time_t)(timeout_micros / 1000000);
            d.at.tv_nsec += (long)(timeout_micros % 1000000) * 1000;
            if (d.at.tv_nsec >= 1000000000L) {
                d.at.tv_sec += 1;
                d.at.tv_nsec -= 1000000000L;
            }
            TSInput input = {&src, read_source, TSInputEncodingUTF8, NULL};
            TSParseOptions options = {&d, past_deadline};
            tree = ts_parser_parse_with_options(parser, NULL, input, options);
        }
    }
    if (tree != NULL) {
        TSNode root = ts_tree_root_node(tree);
        count = ts_node_descendant_count(root);
        has_error = ts_node_has_error(root);
        if (named_only || max_nodes < 0 || count <= max_nodes) {
            walked = 1;
            Py_BLOCK_THREADS;
            walk_rc = walk_alloc(&w, count, fields, has_error);
            Py_UNBLOCK_THREADS;
            if (walk_rc == 0)
                walk_rc = fields ? walk_tree(&w, tree, lang, named_only, fields, has_error)
                                 : walk_subtrees(&w, tree, lang, named_only, has_error);
        }
    }
    if (parser != NULL) ts_parser_delete(parser); /* frees its own blocks and its external scanner's state */
    left = arena_end(); /* the tree, released whole (the TSTree pointer is not used after this) */
    Py_END_ALLOW_THREADS;
    last_left = left;

    if (!set_ok) {
        PyErr_SetString(parser == NULL ? PyExc_MemoryError : PyExc_ValueError,
                        "tree-sitter refused the language");
    } else if (tree == NULL) {
        if (timeout_micros >= 0) {
            result = Py_None;
            Py_INCREF(result);
        } else {
            PyErr_SetString(PyExc_RuntimeError, "tree-sitter returned no tree");
        }
    } else if (walk_rc == -1) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
    } else if (walk_rc == -2) {
        PyErr_SetString(PyExc_RuntimeError, "tree-sitter cursor visited more nodes than descendant_count");
    } else if (!walked) {
        result = Py_BuildValue("(OLOOOOOO)", has_error ? Py_True : Py_False, (long long)count, Py_None, Py_None,
                               Py_None, Py_None, Py_None, Py_None);
    } else if (walk_trim(&w) == 0) {
        PyObject **c = w.columns;
        result = Py_BuildValue("(OLOOOOOO)", has_error ? Py_True : Py_False, (long long)count, c[COL_KINDS],
                               c[COL_STARTS], c[COL_ENDS], c[COL_PARENTS], c[COL_FIELDS], c[COL_MISSING]);
    }
    walk_free(&w);
release_buffer:
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"parse_walk", parse_walk, METH_VARARGS,
     "parse_walk(language, data, named_only, fields, max_nodes, timeout_micros) -> None or "
     "(has_error, nodes, kinds, starts, ends, parents, field_ids, missing)"},
    {"arena_left", arena_left, METH_NOARGS, "arena_left() -> blocks this thread's last call released with its arena"},
    {"arena_exercise", arena_exercise, METH_VARARGS,
     "arena_exercise(small, large, size) -> blocks released by arena_end (a test of the arena)"},
    {"language_info", language_info, METH_O, "language_info(language) -> (pointer, abi version, supported)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_code",
                                    "tree-sitter parse + preorder walk into columns (structpos.parsers.code).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__native_code(void) {
    arena_init();
    ts_set_allocator(arena_malloc, arena_calloc, arena_realloc, arena_free);
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "LANGUAGE_VERSION", TREE_SITTER_LANGUAGE_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "MIN_COMPATIBLE_LANGUAGE_VERSION", TREE_SITTER_MIN_COMPATIBLE_LANGUAGE_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
