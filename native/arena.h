/* A per-call arena for the vendored tree-sitter runtime's allocations (native/code.c).
 *
 * tree-sitter allocates and frees one small block per subtree, stack node and array; with glibc's malloc
 * that costs ~15 % of a parse (py-tree-sitter routes the same calls to pymalloc, which needs the GIL; our
 * parse runs without it). Every block the runtime allocates during parse_walk is freed by the end of the
 * call (a parser made for the call, the tree deleted after the walk), so the blocks can live in an arena
 * that exists for the call only:
 *
 *   - sizes up to ARENA_SMALL bytes are rounded up to a multiple of 16 (their size class) and carved from
 *     64 KiB chunks; a freed block goes onto its class's free list and serves the next block of that class,
 *     so the arena holds about the call's peak of live blocks, not the sum of all it allocated;
 *   - larger blocks go to malloc;
 *   - arena_end() releases the chunks whole (it counts the live blocks and, should any be left, leaks the
 *     chunks rather than free a block in use). The thread keeps up to ARENA_SPARE chunks for its next call
 *     (a pthread key, whose destructor frees them when the thread ends): freed to malloc, a call's chunks
 *     would be trimmed from the heap and page-faulted in again by the next call, ~8 % of a parse.
 *
 * Each block has a 16-byte header holding its class (ARENA_LARGE: a malloc block), so the data keeps
 * malloc's 16-byte alignment. The arena is per thread (thread-local): calls on other threads have their
 * own. An allocation outside a call (none is expected) goes to malloc. Like tree-sitter's default
 * allocator, an allocation that fails aborts: the runtime cannot recover from a NULL. */
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
#define ARENA_LARGE UINT64_MAX
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

typedef struct {
    int active;
    int64_t live; /* small blocks allocated and not freed */
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

static void *arena_large(size_t size) {
    if (size > SIZE_MAX - sizeof(ArenaHeader)) return arena_out_of_memory(size);
    ArenaHeader *h = malloc(sizeof(ArenaHeader) + size);
    if (h == NULL) return arena_out_of_memory(size);
    h->size_class = ARENA_LARGE;
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
    if (h->size_class == ARENA_LARGE) {
        free(h);
        return;
    }
    Arena *a = &arena_of_thread; /* a small block is freed in its call, on its thread */
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
    if (h->size_class == ARENA_LARGE) { /* stays a malloc block */
        if (size > SIZE_MAX - sizeof(ArenaHeader)) return arena_out_of_memory(size);
        ArenaHeader *grown = realloc(h, sizeof(ArenaHeader) + size);
        if (grown == NULL) return arena_out_of_memory(size);
        return grown + 1;
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

/* Start this thread's arena for one call (every block allocated from now on is freed before arena_end). */
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

/* Release this thread's chunks: up to ARENA_SPARE kept for its next call, the rest freed. Returns 0, or -1
 * where blocks were still live (then the used chunks are left allocated: a leak, never a block freed under
 * its user). */
static int arena_end(void) {
    Arena *a = &arena_of_thread;
    int leaked = a->live != 0;
    ArenaChunk *spare = a->spare;
    int spare_count = a->spare_count;
    while (!leaked && a->chunks != NULL) {
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
    return leaked ? -1 : 0;
}

#endif
