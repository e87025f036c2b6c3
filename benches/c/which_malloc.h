/*
 * `--which-malloc` of the C benchmark programs: print "malloc_from=PATH", the file the
 * program's malloc resolved to, so that `cargo xtask bench` and `pair-count` can check
 * that an LD_PRELOAD library really took over malloc. Needs _GNU_SOURCE (dladdr).
 */
#ifndef HAKMEM_BENCH_WHICH_MALLOC_H
#define HAKMEM_BENCH_WHICH_MALLOC_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int which_malloc(void) {
    Dl_info info;
    void *(*volatile m)(size_t) = malloc;
    if (!dladdr((void *)m, &info) || !info.dli_fname) return 1;
    printf("malloc_from=%s\n", info.dli_fname);
    return 0;
}

#endif
