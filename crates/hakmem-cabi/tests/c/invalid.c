/* Misuse inside hakmem's memory: each case must end in a report and abort (exit 3 means
 * the misuse went unnoticed). */
#include "check.h"

#include <malloc.h>

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"

static void finish(void) {
    fprintf(stderr, "misuse not detected\n");
    exit(3);
}

static void interior_free_large(void) {
    char *p = malloc(1 << 20);
    free(p + 64);
    finish();
}

static void interior_realloc_large(void) {
    char *p = malloc(1 << 20);
    p = realloc(p + 4096, 10);
    finish();
}

static void double_free_large(void) {
    char *p = malloc(1 << 20); /* freed large mappings are kept for reuse (fast profile) */
    free(p);
    free(p);
    finish();
}

static void interior_free_small(void) {
    char *p = malloc(64);
    free(p + 16);
    finish();
}

static void double_free_small(void) {
    char *p = malloc(64);
    free(p);
    free(p);
    finish();
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"interior_free_large", interior_free_large},
        {"interior_realloc_large", interior_realloc_large},
        {"double_free_large", double_free_large},
        {"interior_free_small", interior_free_small},
        {"double_free_small", double_free_small},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
