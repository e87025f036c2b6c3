/* Allocations from awkward places at start-up: a constructor calling dlsym/dlerror, glibc
 * allocating dynamic TLS inside __tls_get_addr, dlopen itself. */
#include "check.h"

#include <pthread.h>
#include <stdint.h>

static int constructor_ran;

__attribute__((constructor(101))) static void early(void) {
    /* dlerror keeps its message in a block it mallocs. */
    CHECK(dlsym(RTLD_NEXT, "no_such_symbol_anywhere") == NULL);
    CHECK(dlerror() != NULL);
    char *s = strdup("constructor");
    free(s);
    constructor_ran = 1;
}

static void constructor_allocates(void) {
    CHECK(constructor_ran);
}

static char *(*touch)(int);

static void *tls_thread(void *arg) {
    /* The thread's first allocation happens inside __tls_get_addr. */
    char *block = touch((int)(uintptr_t)arg);
    CHECK(block != NULL);
    CHECK(block[(uintptr_t)arg % 100000] == (char)(uintptr_t)arg);
    return NULL;
}

static void dynamic_tls(void) {
    const char *dir = getenv("TEST_LIB_DIR");
    CHECK(dir != NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/libtls_lib.so", dir);
    void *h = dlopen(path, RTLD_NOW);
    if (!h) fprintf(stderr, "dlopen: %s\n", dlerror());
    CHECK(h != NULL);
    touch = (char *(*)(int))dlsym(h, "touch");
    CHECK(touch != NULL);
    for (int round = 0; round < 20; round++) {
        pthread_t t[8];
        for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, tls_thread, (void *)(uintptr_t)(round * 8 + i));
        for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    }
    tls_thread((void *)(uintptr_t)5);
    CHECK(dlclose(h) == 0);
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"constructor_allocates", constructor_allocates},
        {"dynamic_tls", dynamic_tls},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
