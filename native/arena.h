/* A per-call arena for the vendored tree-sitter runtime's allocations (native/code.c).
 *
 * tree-sitter allocates and frees one small block per subtree, stack node and array; with glibc's malloc
 * that costs ~15 % of a parse (py-tree-sitter routes the same calls to pymalloc, which needs the GIL; our
 * parse runs without it). Nothing the runtime allocates during parse_walk outlives the call (a parser made
 * for the call and deleted in it, a tree walked and dropped), so the blocks live in an arena that exists
 * for the call only:
 *
 *   - sizes up to ARENA_SMALL bytes are rounded up to a multiple of 16 (their size class) and carved from
 *     64 KiB chunks; a freed block goes onto its class's free list and serves the next block of that class,
 *     so the arena holds about the call's peak of live blocks, not the sum of all it allocated;
 *   - larger blocks go to malloc, and those made during a call are kept on a list;
 *   - arena_end() ends the call: it frees the listed large blocks and releases the chunks whole, whatever
 *     is still allocated in them. The caller does not free the tree block by block (ts_tree_delete
 *     walked every subtree to release it: ~4 % of a parse); it calls arena_end() once nothing from the call
 *     is used any more. The thread keeps up to ARENA_SPARE chunks for its next call (a pthread key, whose
 *     destructor frees them when the thread ends): freed to malloc, a call's chunks would be trimmed from
 *     the heap and page-faulted in again by the next call, ~8 % of a parse.
 *
 * Each block has a 16-byte header holding its class (ARENA_LARGE / ARENA_LARGE_CALL: a malloc block), so
 * the data keeps malloc's 16-byte alignment; a large block has its list links before that header. The
 * arena is per thread (thread-local): calls on other threads have their own. An allocation outside a call
 * (none is expected) goes to malloc and is not listed. Like tree-sitter's default allocator, an allocation
 * that fails aborts: the runtime cannot recover from a NULL. */
#ifndef STRUCTPOS_ARENA_H
#define STRUCTPOS_ARENA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 16
#define ARENA_SMALL 1024
#define ARENA_CLASSES (ARENA_SMALL / ARENA_ALIGN)
#define ARENA_CHUNK (64 * 1024)
#define ARENA_LARGE UINT64_MAX            /* a malloc block made outside a call */
#define ARENA_LARGE_CALL (UINT64_MAX - 1) /* a malloc block made in a call: listed, freed by arena_end */
#define ARENA_SPARE 64 /* chunks (4 MiB) a thread keeps between calls */

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define ARENA_KEEPS_SPARES 1
#else
#define ARENA_KEEPS_SPARES 0
#endif

typedef struct {
    uint64_t size_class; /* a block of (size_class + 1) * ARENA_ALIGN bytes, or ARENA_LARGE */
    uint64_t unused;     /* keeps the data 16-byte aligned */
} ArenaHeader;

typedef struct ArenaChunk {
    struct ArenaChunk *next;
    uint64_t unused; /* keeps the blocks 16-byte aligned */
} ArenaChunk;

typedef struct ArenaLarge { /* before a large block's header: 16 bytes, the data stays aligned */
    struct ArenaLarge *prev, *next;
} ArenaLarge;

typedef struct {
    int active;
    int64_t live; /* small blocks allocated and not freed */
    ArenaLarge *large; /* large blocks made in this call and not freed */
    ArenaChunk *chunks, *spare; /* spare: kept from earlier calls, unused */
    int spare_count;
    char *next_block, *chunk_end;
    void *free_lists[ARENA_CLASSES];
} Arena;

static _Thread_local Arena arena_of_thread;

static void *arena_out_of_memory(size_t size) {
    fprintf(stderr, "structpos._native_code: failed to allocate %zu bytes\n", size);
    abort();
}

static void arena_link(Arena *a, ArenaLarge *l) {
    l->prev = NULL;
    l->next = a->large;
    if (a->large != NULL) a->large->prev = l;
    a->large = l;
}

static void arena_unlink(Arena *a, ArenaLarge *l) {
    if (l->prev != NULL) l->prev->next = l->next;
    else a->large = l->next;
    if (l->next != NULL) l->next->prev = l->prev;
}

static ArenaLarge *arena_links(ArenaHeader *h) { return (ArenaLarge *)h - 1; }

static void *arena_large(size_t size) {
    size_t head = sizeof(ArenaLarge) + sizeof(ArenaHeader);
    if (size > SIZE_MAX - head) return arena_out_of_memory(size);
    ArenaLarge *l = malloc(head + size);
    if (l == NULL) return arena_out_of_memory(size);
    ArenaHeader *h = (ArenaHeader *)(l + 1);
    Arena *a = &arena_of_thread;
    h->size_class = a->active ? ARENA_LARGE_CALL : ARENA_LARGE;
    if (a->active) arena_link(a, l);
    return h + 1;
}

static void *arena_malloc(size_t size) {
    Arena *a = &arena_of_thread;
    if (!a->active || size > ARENA_SMALL) return arena_large(size);
    size_t size_class = size == 0 ? 0 : (size - 1) / ARENA_ALIGN;
    void *block = a->free_lists[size_class];
    a->live++;
    if (block != NULL) {
        a->free_lists[size_class] = *(void **)block;
        return block;
    }
    size_t need = sizeof(ArenaHeader) + (size_class + 1) * ARENA_ALIGN;
    if (a->next_block == NULL || (size_t)(a->chunk_end - a->next_block) < need) {
        ArenaChunk *c = a->spare;
        if (c != NULL) {
            a->spare = c->next;
            a->spare_count--;
        } else {
            c = malloc(ARENA_CHUNK);
        }
        if (c == NULL) return arena_out_of_memory(ARENA_CHUNK);
        c->next = a->chunks;
        a->chunks = c;
        a->next_block = (char *)(c + 1);
        a->chunk_end = (char *)c + ARENA_CHUNK;
    }
    ArenaHeader *h = (ArenaHeader *)a->next_block;
    a->next_block += need;
    h->size_class = size_class;
    return h + 1;
}

static void arena_free(void *ptr) {
    if (ptr == NULL) return;
    ArenaHeader *h = (ArenaHeader *)ptr - 1;
    Arena *a = &arena_of_thread; /* a block made in a call is freed in it, on its thread */
    if (h->size_class >= ARENA_LARGE_CALL) {
        if (h->size_class == ARENA_LARGE_CALL) arena_unlink(a, arena_links(h));
        free(arena_links(h));
        return;
    }
    a->live--;
    *(void **)ptr = a->free_lists[h->size_class];
    a->free_lists[h->size_class] = ptr;
}

static void *arena_calloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) return arena_out_of_memory(SIZE_MAX);
    void *ptr = arena_malloc(count * size);
    memset(ptr, 0, count * size);
    return ptr;
}

static void *arena_realloc(void *ptr, size_t size) {
    if (ptr == NULL) return arena_malloc(size);
    ArenaHeader *h = (ArenaHeader *)ptr - 1;
    if (h->size_class >= ARENA_LARGE_CALL) { /* stays a malloc block, on the list if it was */
        size_t head = sizeof(ArenaLarge) + sizeof(ArenaHeader);
        if (size > SIZE_MAX - head) return arena_out_of_memory(size);
        Arena *a = &arena_of_thread;
        int listed = h->size_class == ARENA_LARGE_CALL;
        if (listed) arena_unlink(a, arena_links(h));
        ArenaLarge *grown = realloc(arena_links(h), head + size);
        if (grown == NULL) return arena_out_of_memory(size);
        if (listed) arena_link(a, grown);
        return (ArenaHeader *)(grown + 1) + 1;
    }
    size_t capacity = (h->size_class + 1) * ARENA_ALIGN;
    if (size <= capacity) return ptr;
    void *grown = arena_malloc(size);
    memcpy(grown, ptr, capacity);
    arena_free(ptr);
    return grown;
}

static void arena_free_chunks(void *chunks) {
    for (ArenaChunk *c = chunks; c != NULL;) {
        ArenaChunk *next = c->next;
        free(c);
        c = next;
    }
}

#if ARENA_KEEPS_SPARES
static pthread_key_t arena_spare_key;
static int arena_spare_key_made = 0;

/* Once, at import: the key under which each thread keeps its spare chunks. */
static void arena_init(void) { arena_spare_key_made = pthread_key_create(&arena_spare_key, arena_free_chunks) == 0; }
#else
static void arena_init(void) {}
#endif

/* Start this thread's arena for one call (every block allocated from now on is released by arena_end). */
static void arena_begin(void) {
    Arena *a = &arena_of_thread;
    a->active = 1;
#if ARENA_KEEPS_SPARES
    if (arena_spare_key_made) {
        a->spare = pthread_getspecific(arena_spare_key);
        a->spare_count = 0;
        for (ArenaChunk *c = a->spare; c != NULL; c = c->next) a->spare_count++;
    }
#endif
}

/* End the call: free the large blocks made in it and release this thread's chunks (up to ARENA_SPARE kept
 * for its next call, the rest freed), whatever is still allocated in them. Returns how many blocks the call
 * left allocated (the tree's, which the caller drops this way). */
static int64_t arena_end(void) {
    Arena *a = &arena_of_thread;
    int64_t left = a->live;
    while (a->large != NULL) {
        ArenaLarge *l = a->large;
        a->large = l->next;
        free(l);
        left++;
    }
    ArenaChunk *spare = a->spare;
    int spare_count = a->spare_count;
    while (a->chunks != NULL) {
        ArenaChunk *c = a->chunks;
        a->chunks = c->next;
        if (ARENA_KEEPS_SPARES && spare_count < ARENA_SPARE) {
            c->next = spare;
            spare = c;
            spare_count++;
        } else {
            free(c);
        }
    }
#if ARENA_KEEPS_SPARES
    if (!arena_spare_key_made || pthread_setspecific(arena_spare_key, spare) != 0) arena_free_chunks(spare);
#else
    arena_free_chunks(spare);
#endif
    memset(a, 0, sizeof *a);
    return left;
}

#endif
