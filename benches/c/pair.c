/*
 * One malloc + free pair on the allocator's fast path, N times over, for
 * `cargo xtask pair-count`: run under `valgrind --tool=callgrind` at two loop counts,
 * the difference of the instruction counts over the difference of the counts is what
 * one pair costs (the loop's own few instructions included).
 *
 *   pair --which-malloc      "malloc_from=PATH": the library malloc resolved to
 *   pair N                   N pairs of malloc(32) / free
 *   pair new N               N pairs of C++'s operator new(32) / sized operator delete,
 *                            as a C++ program calls them (whichever library defines them
 *                            first: the preloaded one, else libstdc++, whose new calls
 *                            malloc)
 *
 * Build: gcc -O2 -fno-builtin-malloc -o pair pair.c -lstdc++
 * (-fno-builtin-malloc, and keep() below, so that gcc cannot drop the pair.)
 */
#define _GNU_SOURCE
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

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--which-malloc") == 0) return which_malloc();
    if (argc == 3 && strcmp(argv[1], "new") == 0) {
        unsigned long long n = strtoull(argv[2], NULL, 10);
        for (unsigned long long i = 0; i < n; i++) {
            void *p = _Znwm(32);
            keep(p);
            _ZdlPvm(p, 32);
        }
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: pair --which-malloc | N | new N\n");
        return 2;
    }
    unsigned long long n = strtoull(argv[1], NULL, 10);
    for (unsigned long long i = 0; i < n; i++) {
        void *p = malloc(32);
        keep(p);
        free(p);
    }
    return 0;
}
