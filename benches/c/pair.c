/*
 * One allocation + free on the allocator's fast path, N times over, for
 * `cargo xtask pair-count`: run under `valgrind --tool=callgrind` at two loop counts,
 * the difference of the instruction counts over the difference of the counts is what
 * one pair costs (the loop's own few instructions included).
 *
 *   pair --which-malloc      "malloc_from=PATH": the library malloc resolved to
 *   pair N                   N pairs of malloc(32) / free
 *   pair MODE N              N pairs of MODE's calls (the table below), e.g. `new`:
 *                            C++'s operator new(32) / sized operator delete, as a C++
 *                            program calls them (whichever library defines them first:
 *                            the preloaded one, else libstdc++, whose new calls malloc)
 *
 * Build: gcc -O2 -fno-builtin-malloc -o pair pair.c -lstdc++
 * (-fno-builtin-malloc, and keep() below, so that gcc cannot drop the pair.)
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "which_malloc.h"

/* The pointer escapes into an empty asm that may read memory: the pair must happen. */
static inline void keep(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

/* operator new(std::size_t) and operator delete(void *, std::size_t), by their names in
 * the Itanium C++ ABI. */
extern void *_Znwm(size_t size);
extern void _ZdlPvm(void *p, size_t size);

/* Each mode's loop is a function of its own, the same few instructions around its calls
 * (a counter, a compare and a branch). */
typedef void (*loop_fn)(unsigned long long n);

/* A loop of `alloc` (an expression giving the block) and `free`, n times. */
#define ALLOC_FREE_LOOP(name, alloc)                       \
    static void name(unsigned long long n) {               \
        for (unsigned long long i = 0; i < n; i++) {       \
            void *p = alloc;                               \
            keep(p);                                       \
            free(p);                                       \
        }                                                  \
    }

ALLOC_FREE_LOOP(malloc_free, malloc(32))
ALLOC_FREE_LOOP(calloc_free, calloc(1, 32))
ALLOC_FREE_LOOP(aligned_free, aligned_alloc(64, 64))
ALLOC_FREE_LOOP(malloc_3000_free, malloc(3000))
ALLOC_FREE_LOOP(malloc_40000_free, malloc(40000))

static void new_delete(unsigned long long n) {
    for (unsigned long long i = 0; i < n; i++) {
        void *p = _Znwm(32);
        keep(p);
        _ZdlPvm(p, 32);
    }
}

/* Grown within the block's size class: what a string or vector appended to a little
 * at a time does most often. */
static void realloc_free(unsigned long long n) {
    for (unsigned long long i = 0; i < n; i++) {
        void *p = malloc(20);
        keep(p);
        p = realloc(p, 28);
        keep(p);
        free(p);
    }
}

static void memalign_free(unsigned long long n) {
    for (unsigned long long i = 0; i < n; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 32, 96) != 0) abort();
        keep(p);
        free(p);
    }
}

static void usable_free(unsigned long long n) {
    for (unsigned long long i = 0; i < n; i++) {
        void *p = malloc(40);
        keep((void *)malloc_usable_size(p));
        free(p);
    }
}

static const struct {
    const char *name;
    loop_fn loop;
} MODES[] = {
    { "new", new_delete },
    { "calloc", calloc_free },
    { "realloc", realloc_free },
    { "aligned_alloc", aligned_free },
    { "posix_memalign", memalign_free },
    { "usable_size", usable_free },
    { "malloc-3000", malloc_3000_free },
    { "malloc-40000", malloc_40000_free },
};

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--which-malloc") == 0) return which_malloc();
    if (argc == 2) {
        malloc_free(strtoull(argv[1], NULL, 10));
        return 0;
    }
    for (size_t i = 0; argc == 3 && i < sizeof MODES / sizeof MODES[0]; i++)
        if (strcmp(argv[1], MODES[i].name) == 0) {
            MODES[i].loop(strtoull(argv[2], NULL, 10));
            return 0;
        }
    fprintf(stderr, "usage: pair --which-malloc | N | MODE N, MODE one of:");
    for (size_t i = 0; i < sizeof MODES / sizeof MODES[0]; i++)
        fprintf(stderr, " %s", MODES[i].name);
    fprintf(stderr, "\n");
    return 2;
}
