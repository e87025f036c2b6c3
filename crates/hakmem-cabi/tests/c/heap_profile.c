/* Known allocation sites for the heap profiler (compiled with gcc -O2, run under
 * LD_PRELOAD with HAKMEM_HEAP_PROFILE set):
 *   sites: site A allocates 200 MiB in 1 KiB blocks and keeps a quarter; site B 20 MiB in
 *          64 KiB blocks, keeping half; site C runs in another thread (8 MiB, all freed).
 *   leak:  leaky_site leaks 4 MiB in 512-byte blocks; churn allocates much more and frees
 *          all of it.
 *   signal: holds site A's blocks, raises the dump signal, waits for the dump file.
 * Every site does work after malloc, so gcc cannot turn the call into a tail jump. */
#include "check.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

enum { KIB = 1024, MIB = 1024 * 1024 };

static void *kept[(200 * MIB / KIB) / 4 + 1024];
static size_t nkept;

__attribute__((noinline)) static void site_a(void) {
    for (size_t i = 0; i < 200 * MIB / KIB; i++) {
        char *p = malloc(KIB);
        CHECK(p != NULL);
        p[0] = (char)i;
        if (i % 4 == 0)
            kept[nkept++] = p;
        else
            free(p);
    }
}

__attribute__((noinline)) static void site_b(void) {
    for (size_t i = 0; i < 20 * MIB / (64 * KIB); i++) {
        char *p = malloc(64 * KIB);
        CHECK(p != NULL);
        p[i] = 1;
        if (i % 2 == 0)
            kept[nkept++] = p;
        else
            free(p);
    }
}

__attribute__((noinline)) static void *site_c_in_thread(void *arg) {
    size_t sum = 0;
    for (size_t i = 0; i < 8 * MIB / (4 * KIB); i++) {
        volatile char *p = calloc(1, 4 * KIB);
        CHECK(p != NULL);
        sum += p[i % 4096];
        free((void *)p);
    }
    return (void *)(sum + (size_t)arg);
}

static void sites(void) {
    site_a();
    site_b();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, site_c_in_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    /* Kept blocks stay live until exit: the profile at exit shows them in use. */
}

__attribute__((noinline)) static void leaky_site(void) {
    for (int i = 0; i < 4 * MIB / 512; i++) {
        char *p = malloc(512);
        CHECK(p != NULL);
        p[0] = 1;
        kept[nkept++] = p; /* never freed */
    }
}

__attribute__((noinline)) static void churn(void) {
    for (int round = 0; round < 64; round++) {
        void *ps[1024];
        for (int i = 0; i < 1024; i++) {
            ps[i] = malloc(256 + i);
            CHECK(ps[i] != NULL);
        }
        for (int i = 0; i < 1024; i++) free(ps[i]);
    }
}

static void leak(void) {
    churn();
    leaky_site();
    churn();
    /* Pointers dropped: what is left at exit is the leak. */
    nkept = 0;
}

/* Raise SIGUSR2 and wait for the dump thread to write the first numbered profile. */
static void signal_dump(void) {
    site_a();
    const char *prefix = getenv("HAKMEM_HEAP_PROFILE");
    CHECK(prefix != NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s.1.txt", prefix);
    CHECK(raise(SIGUSR2) == 0);
    struct stat st;
    for (int i = 0; i < 3000 && stat(path, &st) != 0; i++) usleep(10000);
    CHECK(stat(path, &st) == 0);
    /* The explicit dump of the prefixed API too. */
    snprintf(path, sizeof path, "%s.api", prefix);
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hakmem_heap_profile_dump");
    CHECK(dump != NULL);
    CHECK(dump(path) == 0);
}

/* Run with an interval of 1 byte: every block is sampled; the second free must abort. */
static void double_free(void) {
    char *p = malloc(100);
    CHECK(p != NULL);
    free(p);
    free(p);
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"sites", sites},
        {"leak", leak},
        {"signal", signal_dump},
        {"double_free", double_free},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
