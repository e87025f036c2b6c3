/* Out of memory: run under an address-space limit (RLIMIT_AS, set by oom.rs). Every
 * allocation function fails with NULL (or ENOMEM) and errno ENOMEM, the program keeps
 * running with its blocks intact, and once it frees them it can allocate again. */
#include "check.h"

#include <errno.h>
#include <malloc.h>

#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

#define MAX_BLOCKS 4000000
/* Static: the bookkeeping allocates nothing. */
static char *blocks[MAX_BLOCKS];
static size_t sizes[MAX_BLOCKS];

/* Mostly large blocks (their own mappings), some mid and small ones (slabs). */
static size_t mixed(size_t i) {
    static const size_t mix[] = {1 << 20, 40000, 100, 3000, 2 << 20, 64};
    return mix[i % (sizeof mix / sizeof mix[0])];
}

static size_t small(size_t i) {
    return 16 + i % 1000;
}

static size_t one_mib(size_t i) {
    (void)i;
    return 1 << 20;
}

/* Allocate from index `n` on until malloc fails (with ENOMEM); returns the new count. */
static size_t fill(size_t n, size_t (*size)(size_t)) {
    for (;; n++) {
        CHECK(n < MAX_BLOCKS);
        size_t s = size(n);
        errno = 0;
        char *p = malloc(s);
        if (p == NULL) {
            CHECK(errno == ENOMEM);
            return n;
        }
        p[0] = p[s - 1] = (char)n;
        blocks[n] = p;
        sizes[n] = s;
    }
}

static void check_and_free(size_t n) {
    for (size_t i = 0; i < n; i++) {
        CHECK(blocks[i][0] == (char)i && blocks[i][sizes[i] - 1] == (char)i);
        free(blocks[i]);
    }
}

/* With the address space used up, every way to allocate refuses a large request. */
static void everything_refuses(void) {
    const size_t big = 64 << 20;
    void *out = (void *)1;
    errno = 0;
    CHECK(malloc(big) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(calloc(1, big) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(aligned_alloc(4096, big) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(memalign(4096, big) == NULL && errno == ENOMEM);
    CHECK(posix_memalign(&out, 4096, big) == ENOMEM && out == (void *)1);
    errno = 0;
    CHECK(realloc(blocks[0], big) == NULL && errno == ENOMEM); /* blocks[0] stays */
}

static void address_space_limit(void) {
    size_t first = fill(0, mixed);
    CHECK(first > 10);
    size_t all = fill(first, small); /* until no slab can be refilled either */
    everything_refuses();
    check_and_free(all);
    /* Freed memory serves again: the same mix, as far as the first time. */
    size_t again = fill(0, mixed);
    printf("blocks: %zu mixed, then %zu small; %zu mixed again\n", first, all - first, again);
    CHECK(again >= first);
    check_and_free(again);
}

/* Memory freed by blocks of one kind serves blocks of another once mmap fails: large
 * blocks, then small ones, then large ones again, as many as the first time but for the
 * superslab the thread keeps (4 MiB: five blocks of 1 MiB and a page). Fails while hakmem
 * keeps freed memory in its caches (cached large mappings, empty superslabs) when the
 * OS refuses more: 187, then 135 blocks of 1 MiB under 256 MiB; a malloc_trim(0) before
 * each fill makes it pass (187, then 183). */
static void freed_memory_serves_any_size(void) {
    size_t large = fill(0, one_mib);
    check_and_free(large);
    size_t smalls = fill(0, small);
    check_and_free(smalls);
    size_t again = fill(0, one_mib);
    printf("blocks: %zu of 1 MiB, %zu small, %zu of 1 MiB\n", large, smalls, again);
    CHECK(again + 5 >= large);
    check_and_free(again);
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"address_space_limit", address_space_limit},
        {"freed_memory_serves_any_size", freed_memory_serves_any_size},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
