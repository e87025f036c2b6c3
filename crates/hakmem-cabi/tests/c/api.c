/* The prefixed API through include/hakmem.h, linked with -lhakmem. */
#include "hakmem.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(void) {
    char *p = hakmem_malloc(100);
    CHECK(p != NULL && ((uintptr_t)p & 15) == 0);
    CHECK(hakmem_usable_size(p) >= 100);
    strcpy(p, "hello");
    p = hakmem_realloc(p, 100000);
    CHECK(p != NULL && strcmp(p, "hello") == 0);
    hakmem_free(p);

    int *z = hakmem_calloc(1000, sizeof(int));
    for (int i = 0; i < 1000; i++) CHECK(z[i] == 0);
    hakmem_free(z);
    errno = 0;
    CHECK(hakmem_calloc(SIZE_MAX, 2) == NULL && errno == ENOMEM);

    void *a = hakmem_aligned_alloc(4096, 10);
    CHECK(a != NULL && ((uintptr_t)a & 4095) == 0);
    hakmem_free(a);
    errno = 0;
    CHECK(hakmem_aligned_alloc(3, 10) == NULL && errno == EINVAL);

    /* Linked at build time, hakmem also serves plain malloc: both APIs share blocks. */
    void *m = malloc(24);
    CHECK(hakmem_usable_size(m) == malloc_usable_size(m) && hakmem_usable_size(m) >= 24);
    hakmem_free(m);
    void *h = hakmem_malloc(24);
    free(h);

    HakmemStats s = hakmem_stats();
    CHECK(s.mapped > 0 && s.allocated > 0 && s.mmap_calls > 0);
    hakmem_trim();
    hakmem_stats_print();
    printf("ok\n");
    return 0;
}
