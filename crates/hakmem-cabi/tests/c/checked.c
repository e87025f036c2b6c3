/* Misuse that only checked mode (HAKMEM_CHECK=1) catches, or reports with its size class.
 * Each case prints the pointer it misuses ("pointer %p") on stderr first, so that the test
 * can find it in hakmem's report; exit 3 means the misuse went unnoticed. */
#include "check.h"

#include <malloc.h>
#include <stdint.h>

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Warray-bounds"

static void announce(const void *p) {
    fprintf(stderr, "misusing pointer %p\n", p);
    fflush(stderr);
}

static void finish(void) {
    fprintf(stderr, "misuse not detected\n");
    exit(3);
}

/* Not adjacent: `b` is the newest free block when `a` is freed again. */
static void double_free_apart(void) {
    char *a = malloc(40), *b = malloc(40);
    free(a);
    free(b);
    announce(a);
    free(a);
    finish();
}

static void realloc_after_free(void) {
    char *a = malloc(100), *b = malloc(100);
    free(a);
    free(b);
    announce(a);
    a = realloc(a, 200);
    finish();
}

static void interior_free(void) {
    char *p = malloc(64);
    announce(p + 16);
    free(p + 16);
    finish();
}

static void stack_free(void) {
    char on_stack[64];
    /* Through a volatile pointer, so that the compiler cannot see where it points. */
    char *volatile p = on_stack;
    announce(p);
    free(p);
    finish();
}

static void write_past_usable_size(void) {
    char *p = malloc(24);
    size_t n = malloc_usable_size(p);
    CHECK(n >= 24);
    memset(p, 1, n); /* every usable byte is the program's... */
    p[n] = 1;        /* ...this one is not */
    announce(p);
    free(p);
    finish();
}

static void write_past_aligned_block(void) {
    void *v = NULL;
    CHECK(posix_memalign(&v, 64, 100) == 0);
    char *p = v;
    CHECK(((uintptr_t)p & 63) == 0);
    p[malloc_usable_size(p)] = 1;
    announce(p);
    free(p);
    finish();
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"double_free_apart", double_free_apart},
        {"realloc_after_free", realloc_after_free},
        {"interior_free", interior_free},
        {"stack_free", stack_free},
        {"write_past_usable_size", write_past_usable_size},
        {"write_past_aligned_block", write_past_aligned_block},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
