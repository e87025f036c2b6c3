/* The malloc family's semantics under hakmem; one case per argument (see semantics.rs). */
#include "check.h"
#include "hakmem.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* Impossible sizes are the point of several cases. */
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define ALIGNED(p, a) (((uintptr_t)(p) & ((a) - 1)) == 0)

/* Functions glibc 2.36 does not declare (C23) or hakmem's own, looked up at run time. */
static void *sym(const char *name) {
    void *f = dlsym(RTLD_DEFAULT, name);
    CHECK(f != NULL);
    return f;
}

static size_t hakmem_mapped(void) {
    HakmemStats (*stats)(void) = (HakmemStats (*)(void))sym("hakmem_stats");
    return stats().mapped;
}

static void malloc_zero(void) {
    void *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = malloc(0);
        CHECK(p[i] != NULL);
        for (int j = 0; j < i; j++) CHECK(p[i] != p[j]);
    }
    for (int i = 0; i < 100; i++) free(p[i]);
}

static void free_null(void) {
    errno = 4321;
    free(NULL);
    CHECK(errno == 4321);
}

/* Enough frees of every kind to go through the slow paths (cache flushes, superslabs
 * going empty, large mappings cached and unmapped); errno must survive each. */
static void free_keeps_errno(void) {
    enum { N = 20000 };
    static void *p[N];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            p[i] = malloc((size_t)(i % 97) * 40 + 1);
            CHECK(p[i] != NULL);
        }
        for (int i = 0; i < N; i++) {
            errno = 1234;
            free(p[i]);
            CHECK(errno == 1234);
        }
    }
    for (size_t size = 100000; size <= (64u << 20); size *= 4) {
        void *q = malloc(size);
        CHECK(q != NULL);
        memset(q, 1, size);
        errno = 5678;
        free(q);
        CHECK(errno == 5678);
    }
    errno = 42;
    malloc_trim(0);
    void *r = malloc(1 << 20);
    free(r);
    CHECK(errno == 42);
}

static void out_of_memory(void) {
    errno = 0;
    CHECK(malloc(SIZE_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(malloc(PTRDIFF_MAX) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(memalign(64, SIZE_MAX - 100) == NULL && errno == ENOMEM);
    errno = 0; /* alignment over 1 TiB: hakmem cannot serve it */
    CHECK(aligned_alloc((size_t)1 << 41, 100) == NULL && errno == ENOMEM);
    /* Over a chunk (4 MiB) it can: a mapping placed for it. */
    char *a = aligned_alloc(8u << 20, 100);
    CHECK(a != NULL && (uintptr_t)a % (8u << 20) == 0 && malloc_usable_size(a) >= 100);
    strcpy(a, "aligned");
    a = realloc(a, 5u << 20);
    CHECK(a != NULL && strcmp(a, "aligned") == 0);
    free(a);
    char *p = malloc(100);
    strcpy(p, "still here");
    errno = 0;
    CHECK(realloc(p, SIZE_MAX) == NULL && errno == ENOMEM);
    CHECK(strcmp(p, "still here") == 0);
    free(p);
}

static void calloc_overflow_and_zero(void) {
    errno = 0;
    CHECK(calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(calloc(3, SIZE_MAX / 2) == NULL && errno == ENOMEM);
    /* Dirty memory comes back zeroed. */
    for (size_t size = 8; size < (4u << 20); size = size * 3 + 5) {
        for (int i = 0; i < 4; i++) {
            unsigned char *d = malloc(size);
            memset(d, 0xAB, size);
            free(d);
            unsigned char *z = calloc(1, size);
            CHECK(z != NULL);
            for (size_t k = 0; k < size; k++) CHECK(z[k] == 0);
            free(z);
        }
    }
    /* Every size the thread cache's fast path takes, as one count and as a product: the
     * block just freed comes back dirty from the bin, its link in its first word. */
    for (size_t size = 0; size <= 1100; size++) {
        unsigned char *d = malloc(size);
        memset(d, 0xAB, size);
        free(d);
        unsigned char *z = size % 2 ? calloc(1, size) : calloc(size / 2, 2);
        CHECK(z != NULL);
        for (size_t k = 0; k < size; k++) CHECK(z[k] == 0);
        free(z);
    }
}

static void reallocarray_overflow(void) {
    char *p = malloc(10);
    strcpy(p, "abcdefghi");
    errno = 0;
    CHECK(reallocarray(p, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    CHECK(strcmp(p, "abcdefghi") == 0);
    char *q = reallocarray(p, 1000, 10);
    CHECK(q != NULL && strcmp(q, "abcdefghi") == 0);
    CHECK(malloc_usable_size(q) >= 10000);
    free(q);
}

static void posix_memalign_rules(void) {
    void *const sentinel = (void *)0x1234;
    size_t bad[] = {0, 1, 2, 3, 4, 12, 24, 48, 100};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *out = sentinel;
        errno = 77;
        CHECK(posix_memalign(&out, bad[i], 10) == EINVAL);
        CHECK(out == sentinel);
        CHECK(errno == 77);
    }
    /* Many blocks of each at once, so that they fill slabs and spans past the first
     * block; aligned requests share classes whose sizes are multiples of the alignment. */
    enum { LIVE = 48 };
    size_t good[] = {8, 16, 32, 64, 128, 256, 512, 4096, 65536, 1u << 20, 2u << 20};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        for (size_t size = 0; size < 300000; size = size * 2 + 7) {
            void *live[LIVE];
            for (int round = 0; round < 2; round++) { /* the second from the cache */
                for (int j = 0; j < LIVE; j++) {
                    void *out = sentinel;
                    CHECK(posix_memalign(&out, good[i], size) == 0);
                    CHECK(out != sentinel && ALIGNED(out, good[i]));
                    CHECK(malloc_usable_size(out) >= size);
                    memset(out, 0x5A, size);
                    live[j] = out;
                }
                for (int j = 0; j < LIVE; j++) free(live[j]);
            }
        }
    }
    void *out = sentinel;
    errno = 77;
    CHECK(posix_memalign(&out, 64, SIZE_MAX - 10) == ENOMEM);
    CHECK(out == sentinel && errno == 77);
}

/* A successful posix_memalign leaves errno alone even when hakmem's mmap at its address
 * hint fails first (EEXIST): a large block grown in place by realloc takes the range the
 * next hinted mapping was to use. Found by the fuzz target c_api. */
static void posix_memalign_keeps_errno(void) {
    char *p = malloc(1 << 20);
    CHECK(p != NULL);
    p = realloc(p, 6 << 20);
    CHECK(p != NULL);
    for (int i = 0; i < 4; i++) {
        void *q = NULL;
        errno = 4242;
        CHECK(posix_memalign(&q, 4096, 1 << 20) == 0);
        CHECK(errno == 4242);
        free(q);
        p = realloc(p, (size_t)(7 + 2 * i) << 20);
        CHECK(p != NULL);
    }
    free(p);
}

static void aligned_alloc_rules(void) {
    struct { size_t align, size; } ok[] = {{64, 100}, {4096, 5000}, {32, 1}, {16, 3}, {256, 1000000}, {1, 7}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        void *p = aligned_alloc(ok[i].align, ok[i].size);
        CHECK(p != NULL && ALIGNED(p, ok[i].align));
        CHECK(malloc_usable_size(p) >= ok[i].size);
        memset(p, 1, ok[i].size);
        free(p);
    }
    errno = 0;
    CHECK(aligned_alloc(3, 10) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(aligned_alloc(0, 10) == NULL && errno == EINVAL);
}

static void memalign_valloc_pvalloc(void) {
    long page = sysconf(_SC_PAGESIZE);
    void *a = memalign(24, 10); /* not a power of two: rounded up, as glibc does */
    CHECK(a != NULL && ALIGNED(a, 32));
    void *b = memalign(4, 10);
    CHECK(b != NULL && ALIGNED(b, 16));
    void *v = valloc(100);
    CHECK(v != NULL && ALIGNED(v, page));
    void *pv = pvalloc(100);
    CHECK(pv != NULL && ALIGNED(pv, page) && malloc_usable_size(pv) >= (size_t)page);
    memset(pv, 3, page);
    errno = 0;
    CHECK(memalign(SIZE_MAX / 2 + 2, 10) == NULL && errno == EINVAL);
    free(a);
    free(b);
    free(v);
    free(pv);
}

static void realloc_null_and_zero(void) {
    char *p = realloc(NULL, 100);
    CHECK(p != NULL && malloc_usable_size(p) >= 100);
    memset(p, 7, 100);
    CHECK(realloc(p, 0) == NULL); /* freed, as glibc does */
    /* Growing and shrinking keep the contents. */
    char *q = malloc(10);
    for (int i = 0; i < 10; i++) q[i] = (char)i;
    size_t sizes[] = {100, 5000, 70000, 3u << 20, 40u << 20, 200, 17, 1 << 20, 5};
    size_t kept = 10;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        q = realloc(q, sizes[s]);
        CHECK(q != NULL);
        if (sizes[s] < kept) kept = sizes[s];
        for (size_t i = 0; i < kept; i++) CHECK(q[i] == (char)i);
    }
    free(q);
}

static void usable_size_rules(void) {
    CHECK(malloc_usable_size(NULL) == 0);
    enum { N = 2000 };
    static unsigned char *p[N];
    static size_t usable[N];
    for (int i = 0; i < N; i++) {
        size_t size = i < 1500 ? (size_t)i * 7 : (size_t)(i - 1500) * 1000 + 60000;
        p[i] = malloc(size);
        usable[i] = malloc_usable_size(p[i]);
        CHECK(usable[i] >= size);
        memset(p[i], i & 0xFF, usable[i]); /* every usable byte is writable */
    }
    /* Other allocations and frees do not change a block's usable size. */
    for (int i = 0; i < N; i += 2) free(p[i]);
    for (int i = 0; i < N; i += 2) p[i] = malloc(33);
    for (int i = 1; i < N; i += 2) {
        CHECK(malloc_usable_size(p[i]) == usable[i]);
        for (size_t k = 0; k < usable[i]; k++) CHECK(p[i][k] == (i & 0xFF));
    }
    for (int i = 0; i < N; i++) free(p[i]);
}

static void sixteen_byte_alignment(void) {
    for (size_t size = 0; size < 70000; size += (size < 4096 ? 1 : 997)) {
        void *p = malloc(size);
        CHECK(ALIGNED(p, 16));
        void *q = calloc(1, size);
        CHECK(ALIGNED(q, 16));
        p = realloc(p, size + 100);
        CHECK(ALIGNED(p, 16));
        free(p);
        free(q);
    }
    for (size_t size = 1 << 16; size < (64u << 20); size *= 3) {
        void *p = malloc(size);
        CHECK(ALIGNED(p, 16));
        free(p);
    }
}

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static void libc_aliases(void) {
    size_t (*usable)(const void *) = (size_t (*)(const void *))sym("hakmem_usable_size");
    void *a = __libc_malloc(10);
    void *b = __libc_calloc(10, 10);
    void *c = __libc_memalign(256, 10);
    CHECK(usable(a) >= 10 && usable(b) >= 100 && usable(c) >= 10 && ALIGNED(c, 256));
    a = __libc_realloc(a, 100000);
    CHECK(usable(a) >= 100000);
    __libc_free(a);
    free(b);
    __libc_free(c);
}

static void c23_sized_frees(void) {
    void (*free_sized)(void *, size_t) = (void (*)(void *, size_t))sym("free_sized");
    void (*free_aligned_sized)(void *, size_t, size_t) =
        (void (*)(void *, size_t, size_t))sym("free_aligned_sized");
    for (size_t size = 1; size < 1000000; size = size * 5 + 1) {
        void *p = malloc(size);
        errno = 9;
        free_sized(p, size);
        void *q = aligned_alloc(128, size);
        free_aligned_sized(q, 128, size);
        CHECK(errno == 9);
    }
    free_sized(NULL, 10);
}

static void trim_gives_memory_back(void) {
    void *big = malloc(8u << 20); /* freed large mappings are cached... */
    memset(big, 1, 8u << 20);
    free(big);
    size_t before = hakmem_mapped();
    CHECK(malloc_trim(0) == 1); /* ...until trimmed */
    CHECK(hakmem_mapped() < before);
}

static void glibc_introspection(void) {
    void *p = malloc(1000);
    struct mallinfo2 m = mallinfo2();
    CHECK(m.arena > 0 && m.uordblks > 0);
    struct mallinfo old = mallinfo();
    CHECK(old.arena > 0);
    CHECK(mallopt(M_ARENA_MAX, 2) == 1);
    malloc_stats();
    CHECK(malloc_info(0, stdout) == 0);
    CHECK(malloc_info(1, stdout) == -1);
    free(p);
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"malloc_zero", malloc_zero},
        {"free_null", free_null},
        {"free_keeps_errno", free_keeps_errno},
        {"out_of_memory", out_of_memory},
        {"calloc_overflow_and_zero", calloc_overflow_and_zero},
        {"reallocarray_overflow", reallocarray_overflow},
        {"posix_memalign_rules", posix_memalign_rules},
        {"posix_memalign_keeps_errno", posix_memalign_keeps_errno},
        {"aligned_alloc_rules", aligned_alloc_rules},
        {"memalign_valloc_pvalloc", memalign_valloc_pvalloc},
        {"realloc_null_and_zero", realloc_null_and_zero},
        {"usable_size_rules", usable_size_rules},
        {"sixteen_byte_alignment", sixteen_byte_alignment},
        {"libc_aliases", libc_aliases},
        {"c23_sized_frees", c23_sized_frees},
        {"trim_gives_memory_back", trim_gives_memory_back},
        {"glibc_introspection", glibc_introspection},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
