/* Shared by the C test programs: CHECK, whether hakmem is the allocator, case dispatch. */
#ifndef HAKMEM_TEST_CHECK_H
#define HAKMEM_TEST_CHECK_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* Whether libhakmem.so is in the process (preloaded or linked). */
static inline int hakmem_loaded(void) {
    return dlsym(RTLD_DEFAULT, "hakmem_malloc") != NULL;
}

typedef void (*test_case)(void);
struct named_case {
    const char *name;
    test_case run;
};

/* Run the case named argv[1] (it must exist), after checking hakmem is loaded. */
static inline int run_named(int argc, char **argv, const struct named_case *cases) {
    CHECK(argc == 2);
    CHECK(hakmem_loaded());
    for (const struct named_case *c = cases; c->name; c++) {
        if (strcmp(c->name, argv[1]) == 0) {
            c->run();
            printf("ok\n");
            return 0;
        }
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}

#endif
