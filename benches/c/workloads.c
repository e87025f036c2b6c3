/*
 * The first workloads of `cargo xtask bench` in C, for running under LD_PRELOAD of a
 * malloc library (libhakmem.so, libmimalloc, libjemalloc) or none (glibc).
 * Same command line and output as the Rust binaries in benches/src:
 *
 *   c-workloads --list              "workload NAME DEFAULT_OPS" per line
 *   c-workloads --which-malloc      "malloc_from=PATH": the library malloc resolved to
 *   c-workloads NAME [OPS]          "RESULT workload=NAME ops=... secs=... peak_rss_kb=..."
 *
 * Build: gcc -O2 -pthread -o c-workloads workloads.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- random numbers: SplitMix64, as benches/src/rng.rs ---- */

typedef struct { uint64_t s; } rng_t;

static rng_t rng_new(uint64_t seed) {
    rng_t r = { seed * 0x9E3779B97F4A7C15ull ^ 0x2545F4914F6CDD1Dull };
    return r;
}

static uint64_t rng_next(rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t rng_below(rng_t *r, size_t n) {
    return (size_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

static size_t rng_between(rng_t *r, size_t lo, size_t hi) {
    return lo + rng_below(r, hi - lo + 1);
}

/* ---- blocks: malloc'd and touched at both ends, as benches/src/block.rs ---- */

static volatile unsigned char sink;

static void *block_new(size_t size) {
    unsigned char *p = malloc(size);
    if (!p) {
        fprintf(stderr, "out of memory (%zu bytes)\n", size);
        abort();
    }
    p[0] = (unsigned char)size;
    p[size - 1] = 1;
    return p;
}

static void block_free(void *p) {
    if (p) {
        sink = *(unsigned char *)p;
        free(p);
    }
}

/* ---- slot churn: free a random slot, allocate a block of random size there ---- */

typedef struct { size_t lo, hi; } sizes_t;

static void churn(void **slots, size_t n, rng_t *rng, uint64_t ops, sizes_t sizes) {
    for (uint64_t i = 0; i < ops; i++) {
        void **slot = &slots[rng_below(rng, n)];
        block_free(*slot);
        *slot = block_new(rng_between(rng, sizes.lo, sizes.hi));
    }
}

static void free_slots(void **slots, size_t n) {
    for (size_t i = 0; i < n; i++) block_free(slots[i]);
    free(slots);
}

/* ---- threads: run work(t, arg) for t in 0..threads; one thread runs inline ---- */

typedef void (*work_fn)(size_t t, void *arg);
typedef struct { work_fn work; size_t t; void *arg; } thread_arg_t;

static void *thread_main(void *p) {
    thread_arg_t *a = p;
    a->work(a->t, a->arg);
    return NULL;
}

static void on_threads(size_t threads, work_fn work, void *arg) {
    if (threads == 1) {
        work(0, arg);
        return;
    }
    pthread_t ids[threads];
    thread_arg_t args[threads];
    for (size_t t = 0; t < threads; t++) {
        args[t] = (thread_arg_t){ work, t, arg };
        if (pthread_create(&ids[t], NULL, thread_main, &args[t]) != 0) abort();
    }
    for (size_t t = 0; t < threads; t++) pthread_join(ids[t], NULL);
}

/* ---- churn on several threads, each with its own working set ---- */

typedef struct { uint64_t ops; size_t slots; sizes_t sizes; } churn_spec_t;

static void churn_worker(size_t t, void *arg) {
    churn_spec_t *spec = arg;
    void **slots = calloc(spec->slots, sizeof(void *));
    rng_t rng = rng_new(t);
    churn(slots, spec->slots, &rng, spec->ops, spec->sizes);
    free_slots(slots, spec->slots);
}

static uint64_t churn_threads(uint64_t ops, size_t threads, size_t slots, sizes_t sizes) {
    uint64_t per_thread = ops / threads ? ops / threads : 1;
    churn_spec_t spec = { per_thread, slots, sizes };
    on_threads(threads, churn_worker, &spec);
    return per_thread * threads;
}

static uint64_t random_mixed(uint64_t ops) {
    return churn_threads(ops, 1, 400, (sizes_t){ 16, 1024 });
}

static uint64_t mid_large(uint64_t ops) {
    return churn_threads(ops, 2, 64, (sizes_t){ 8 << 10, 32 << 10 });
}

/* ---- fixed size: malloc and free one 256-byte block, over and over ---- */

static uint64_t fixed_size(uint64_t ops) {
    for (uint64_t i = 0; i < ops; i++) block_free(block_new(256));
    return ops;
}

/* ---- larson: replace blocks of 10..1000 B, pass the arrays on to the next thread ---- */

enum { LARSON_SLOTS = 1000, LARSON_ROUND = 10000, LARSON_MAX_THREADS = 2 };

typedef struct {
    size_t threads;
    uint64_t round, rounds;
    void **arrays[LARSON_MAX_THREADS];
    pthread_barrier_t barrier;
} larson_t;

static void larson_worker(size_t t, void *arg) {
    larson_t *l = arg;
    rng_t rng = rng_new(t);
    for (uint64_t r = 0; r < l->rounds; r++) {
        /* In round r thread t works on array t + r: the arrays move one thread on. */
        churn(l->arrays[(t + r) % l->threads], LARSON_SLOTS, &rng, l->round,
              (sizes_t){ 10, 1000 });
        pthread_barrier_wait(&l->barrier);
    }
}

static uint64_t larson(uint64_t ops, size_t threads) {
    larson_t l = { .threads = threads };
    uint64_t round = ops / threads;
    l.round = round < 1 ? 1 : round > LARSON_ROUND ? LARSON_ROUND : round;
    l.rounds = ops / (threads * l.round) ? ops / (threads * l.round) : 1;
    for (size_t t = 0; t < threads; t++) l.arrays[t] = calloc(LARSON_SLOTS, sizeof(void *));
    pthread_barrier_init(&l.barrier, NULL, (unsigned)threads);
    on_threads(threads, larson_worker, &l);
    pthread_barrier_destroy(&l.barrier);
    for (size_t t = 0; t < threads; t++) free_slots(l.arrays[t], LARSON_SLOTS);
    return l.rounds * l.round * threads;
}

static uint64_t larson_1t(uint64_t ops) { return larson(ops, 1); }
static uint64_t larson_2t(uint64_t ops) { return larson(ops, 2); }

/* ---- the workloads by name, and the driver ---- */

typedef struct {
    const char *name;
    uint64_t default_ops;
    uint64_t (*run)(uint64_t ops);
} workload_t;

static const workload_t WORKLOADS[] = {
    { "c-random-mixed", 20000000, random_mixed },
    { "c-fixed-size", 50000000, fixed_size },
    { "c-larson-1t", 10000000, larson_1t },
    { "c-larson-2t", 10000000, larson_2t },
    { "c-mid-large", 5000000, mid_large },
};
enum { NUM_WORKLOADS = sizeof WORKLOADS / sizeof WORKLOADS[0] };

/* Untimed warm-up of this fraction of the operations first, as the Rust binaries do. */
enum { WARM_UP_DIVISOR = 10 };

static double now_secs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* VmHWM of this process in KiB, 0 if unreadable. */
static long peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb;
}

static int which_malloc(void) {
    Dl_info info;
    void *(*volatile m)(size_t) = malloc;
    if (!dladdr((void *)m, &info) || !info.dli_fname) return 1;
    printf("malloc_from=%s\n", info.dli_fname);
    return 0;
}

static int run(const workload_t *w, uint64_t ops) {
    w->run(ops / WARM_UP_DIVISOR ? ops / WARM_UP_DIVISOR : 1);
    double start = now_secs();
    uint64_t done = w->run(ops);
    double secs = now_secs() - start;
    printf("RESULT workload=%s ops=%llu secs=%.9f peak_rss_kb=%ld\n", w->name,
           (unsigned long long)done, secs, peak_rss_kb());
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < NUM_WORKLOADS; i++)
            printf("workload %s %llu\n", WORKLOADS[i].name,
                   (unsigned long long)WORKLOADS[i].default_ops);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--which-malloc") == 0) return which_malloc();
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: c-workloads --list | --which-malloc | WORKLOAD [OPS]\n");
        return 2;
    }
    for (size_t i = 0; i < NUM_WORKLOADS; i++)
        if (strcmp(argv[1], WORKLOADS[i].name) == 0)
            return run(&WORKLOADS[i],
                       argc == 3 ? strtoull(argv[2], NULL, 10) : WORKLOADS[i].default_ops);
    fprintf(stderr, "unknown workload %s; --list shows them\n", argv[1]);
    return 2;
}
