/*
 * One malloc + free pair on the allocator's fast path, N times over, for
 * `cargo xtask pair-count`: run under `valgrind --tool=callgrind` at two loop counts,
 * the difference of the instruction counts over the difference of the counts is what
 * one pair costs (the loop's own few instructions included).
 *
 *   pair --which-malloc      "malloc_from=PATH": the library malloc resolved to
 *   pair N                   N pairs of malloc(32) / free
 *
 * Build: gcc -O2 -fno-builtin-malloc -o pair pair.c
 * (-fno-builtin-malloc, and keep() below, so that gcc cannot drop the pair.)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "which_malloc.h"

/* The pointer escapes into an empty asm that may read memory: the pair must happen. */
static inline void keep(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--which-malloc") == 0) return which_malloc();
    if (argc != 2) {
        fprintf(stderr, "usage: pair --which-malloc | N\n");
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
