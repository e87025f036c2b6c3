/* Pointers hakmem never handed out, given to free, realloc and malloc_usable_size. */
#include "check.h"

#include <malloc.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* Freeing what malloc did not return is the point. */
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"

/* glibc's own malloc, which the preloaded hakmem hides from the global scope. */
static void *glibc_malloc(size_t size) {
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL);
    void *(*f)(size_t) = (void *(*)(size_t))dlsym(libc, "malloc");
    CHECK(f != NULL && f != (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc"));
    return f(size);
}

static void free_is_ignored(void) {
    char *g = glibc_malloc(100);
    strcpy(g, "glibc");
    free(g); /* left alone: still glibc's, still readable */
    CHECK(strcmp(g, "glibc") == 0);
    static char in_data[64];
    free(in_data + 16);
    char on_stack[64];
    free(on_stack);
    CHECK(malloc_usable_size(g) == 0);
}

/* The sized frees (C23's free_sized, C++'s sized delete) leave such pointers alone too:
 * the size they state is no reason to take a block into hakmem's lists. */
static void sized_free_is_ignored(void) {
    void (*free_sized)(void *, size_t) =
        (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
    void (*sized_delete)(void *, size_t) =
        (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
    CHECK(free_sized != NULL && sized_delete != NULL);
    char *g = glibc_malloc(100);
    strcpy(g, "glibc");
    free_sized(g, 100);
    sized_delete(g, 100);
    CHECK(strcmp(g, "glibc") == 0);
    static char in_data[64];
    free_sized(in_data + 16, 32);
    sized_delete(in_data + 16, 32);
    char on_stack[64];
    sized_delete(on_stack, 64);
    /* None of them went into a thread cache: the next blocks of those sizes are hakmem's. */
    void *live[256];
    for (int i = 0; i < 256; i++) {
        live[i] = malloc(i % 2 ? 32 : 64);
        CHECK(live[i] != g && live[i] != in_data + 16 && live[i] != on_stack);
    }
    /* hakmem's own blocks are freed, and come back. */
    for (int i = 0; i < 256; i++) {
        if (i % 4 < 2) free_sized(live[i], i % 2 ? 32 : 64);
        else sized_delete(live[i], i % 2 ? 32 : 64);
    }
}

static void realloc_copies(void) {
    unsigned char *g = glibc_malloc(1000);
    for (int i = 0; i < 1000; i++) g[i] = (unsigned char)i;
    unsigned char *grown = realloc(g, 5000);
    CHECK(grown != NULL && grown != g && malloc_usable_size(grown) >= 5000);
    for (int i = 0; i < 1000; i++) CHECK(grown[i] == (unsigned char)i);
    free(grown);

    unsigned char *h = glibc_malloc(1000);
    memset(h, 9, 1000);
    unsigned char *shrunk = realloc(h, 100);
    CHECK(shrunk != NULL && malloc_usable_size(shrunk) >= 100);
    for (int i = 0; i < 100; i++) CHECK(shrunk[i] == 9);
    free(shrunk);

    CHECK(realloc(glibc_malloc(10), 0) == NULL);
}

/* The old block's size is unknown: the copy must stop at the end of readable memory. */
static void realloc_stops_at_unmapped_memory(void) {
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    CHECK(munmap(m + page, page) == 0);
    char *tail = m + page - 50;
    memset(tail, 'x', 50);
    char *q = realloc(tail, 100000);
    CHECK(q != NULL);
    for (int i = 0; i < 50; i++) CHECK(q[i] == 'x');
    free(q);
    /* A page that is mapped but unreadable stops it too. */
    CHECK(mprotect(m, page, PROT_NONE) == 0);
    char *r = realloc(m + 100, 10);
    CHECK(r != NULL);
    free(r);
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"free_is_ignored", free_is_ignored},
        {"sized_free_is_ignored", sized_free_is_ignored},
        {"realloc_copies", realloc_copies},
        {"realloc_stops_at_unmapped_memory", realloc_stops_at_unmapped_memory},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
