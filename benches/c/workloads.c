/*
 * Workloads of `cargo xtask bench` in C, for running under LD_PRELOAD of a
 * malloc library (libhakmem.so, libmimalloc, libjemalloc) or none (glibc).
 * Same command line and output as the Rust binaries in benches/src:
 *
 *   c-workloads --list              "workload NAME DEFAULT_OPS" per line
 *   c-workloads --which-malloc      "malloc_from=PATH": the library malloc resolved to
 *   c-workloads NAME [OPS]          "RESULT workload=NAME ops=... secs=... peak_rss_kb=... ..."
 *
 * Build: gcc -O2 -pthread -o c-workloads workloads.c -lm
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "which_malloc.h"

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

/* `p` (from an allocation of `size` bytes, for `what`), touched at both ends; abort if null. */
static void *touched(unsigned char *p, size_t size, const char *what) {
    if (!p) {
        fprintf(stderr, "out of memory (%s of %zu bytes)\n", what, size);
        abort();
    }
    p[0] = (unsigned char)size;
    p[size - 1] = 1;
    return p;
}

static void *block_new(size_t size) { return touched(malloc(size), size, "malloc"); }

static void block_free(void *p) {
    if (p) {
        sink = *(unsigned char *)p;
        free(p);
    }
}

/* calloc'd, its first and last bytes checked to be zero, then touched at both ends. */
static void *block_new_zeroed(size_t size) {
    unsigned char *p = calloc(1, size);
    if (p && (p[0] != 0 || p[size - 1] != 0)) {
        fprintf(stderr, "calloc(1, %zu) was not zero-filled\n", size);
        abort();
    }
    return touched(p, size, "calloc");
}

/* realloc'd to `size` bytes, then touched at both ends. */
static void *block_resize(void *old, size_t size) { return touched(realloc(old, size), size, "realloc"); }

/* One byte written in every 4 KiB, so that every page is really used. */
static void write_pages(unsigned char *p, size_t size) {
    for (size_t offset = 0; offset < size; offset += 4096) p[offset] = (unsigned char)offset;
}

/* The next round's count of at most `round`, taken from the `*left` still to do. */
static size_t take_round(uint64_t *left, size_t round) {
    size_t n = *left < round ? (size_t)*left : round;
    *left -= n;
    return n;
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

/*
 * 2000 vectors, appended to 16 bytes at a time at random, each grown by realloc to twice
 * its length when malloc_usable_size says it is full, as a program does that counts the
 * bytes it holds by asking the allocator (Redis's zmalloc asks at every call); all freed
 * every 600,000 appends. C only: Rust's allocator interface has no usable size.
 */
static uint64_t usable_growth(uint64_t ops) {
    enum { VECTORS = 2000, ROUND = 600000 };
    unsigned char **v = calloc(VECTORS, sizeof *v);
    size_t *len = calloc(VECTORS, sizeof *len);
    rng_t rng = rng_new(0);
    for (uint64_t i = 0; i < ops; i++) {
        size_t k = rng_below(&rng, VECTORS), want = len[k] + 16;
        if (!v[k] || malloc_usable_size(v[k]) < want) {
            unsigned char *grown = realloc(v[k], 2 * want);
            if (!grown) {
                fprintf(stderr, "out of memory (realloc of %zu bytes)\n", 2 * want);
                abort();
            }
            v[k] = grown;
        }
        memset(v[k] + len[k], (int)i, 16);
        len[k] = want;
        if ((i + 1) % ROUND == 0 || i + 1 == ops)
            for (size_t j = 0; j < VECTORS; j++) {
                free(v[j]);
                v[j] = NULL;
                len[j] = 0;
            }
    }
    free(v);
    free(len);
    return ops;
}

/* ---- aligned: blocks asked for with an alignment over 16 (benches/src/workloads/aligned.rs) ---- */

/* 1000 slots; 16..1024 B aligned to 32, 64 or 128, or one time in sixteen a page-aligned
 * buffer of 4..16 KiB; written at both ends. */
static uint64_t aligned(uint64_t ops) {
    enum { SLOTS = 1000, PAGE = 4096 };
    void **slots = calloc(SLOTS, sizeof(void *));
    rng_t rng = rng_new(0);
    for (uint64_t i = 0; i < ops; i++) {
        void **slot = &slots[rng_below(&rng, SLOTS)];
        block_free(*slot);
        size_t size, align;
        if (rng_below(&rng, 16) == 0) {
            size = rng_between(&rng, PAGE, 4 * PAGE);
            align = PAGE;
        } else {
            size = rng_between(&rng, 16, 1024);
            align = (size_t)32 << rng_below(&rng, 3);
        }
        void *p = NULL;
        if (posix_memalign(&p, align, size) != 0 || ((uintptr_t)p & (align - 1)) != 0) {
            fprintf(stderr, "posix_memalign(%zu, %zu) failed or misaligned\n", align, size);
            abort();
        }
        *slot = touched(p, size, "posix_memalign");
    }
    free_slots(slots, SLOTS);
    return ops;
}

static uint64_t mid_large(uint64_t ops) {
    return churn_threads(ops, 2, 64, (sizes_t){ 8 << 10, 32 << 10 });
}

/* 16 slots of 64 KiB..4 MiB, touched at their ends only (churn.rs's large). */
static uint64_t large(uint64_t ops) {
    return churn_threads(ops, 1, 16, (sizes_t){ 64 << 10, 4 << 20 });
}

static uint64_t wide_churn(uint64_t ops) {
    return churn_threads(ops, 1, 1000, (sizes_t){ 16, 32 << 10 });
}

static uint64_t many_threads(uint64_t ops) {
    return churn_threads(ops, 16, 256, (sizes_t){ 16, 4096 });
}

/* Many short-lived threads, two at a time, each churning 64 slots of 16 B..1 KiB for 1000
 * operations and exiting (thread_churn in churn.rs): what a thread's start and end cost. */
static uint64_t thread_churn(uint64_t ops) {
    enum { THREAD_OPS = 1000 };
    uint64_t rounds = ops / (2 * THREAD_OPS) ? ops / (2 * THREAD_OPS) : 1, done = 0;
    for (uint64_t r = 0; r < rounds; r++)
        done += churn_threads(2 * THREAD_OPS, 2, 64, (sizes_t){ 16, 1024 });
    return done;
}

/* ---- pages: 4000 slots of a power of two from 1 to 8 KiB plus a header (churn.rs) ---- */

/* 4 KiB half the time, 1 KiB a quarter, 2 and 8 KiB an eighth each; plus 8, 16, 32 or 64. */
static size_t page_size(rng_t *rng) {
    static const size_t PAGES[] = { 4096, 4096, 4096, 4096, 1024, 1024, 2048, 8192 };
    static const size_t HEADERS[] = { 8, 16, 32, 64 };
    size_t page = PAGES[rng_below(rng, sizeof PAGES / sizeof *PAGES)];
    return page + HEADERS[rng_below(rng, sizeof HEADERS / sizeof *HEADERS)];
}

/* One thread, `n` slots: free a random one, allocate a block of `size(rng)` bytes there. */
static uint64_t churn_sized(uint64_t ops, size_t n, size_t (*size)(rng_t *)) {
    void **slots = calloc(n, sizeof(void *));
    rng_t rng = rng_new(0);
    for (uint64_t i = 0; i < ops; i++) {
        void **slot = &slots[rng_below(&rng, n)];
        block_free(*slot);
        *slot = block_new(size(&rng));
    }
    free_slots(slots, n);
    return ops;
}

static uint64_t pages(uint64_t ops) { return churn_sized(ops, 4000, page_size); }

/* One thread, 64 slots of power-of-two buffers of 4..64 KiB (churn.rs's io_buffers). */
static size_t io_buffer_size(rng_t *rng) { return (size_t)4096 << rng_below(rng, 5); }

static uint64_t io_buffers(uint64_t ops) { return churn_sized(ops, 64, io_buffer_size); }

/* ---- fixed size: malloc and free one 256-byte block, over and over ---- */

static uint64_t fixed_size(uint64_t ops) {
    for (uint64_t i = 0; i < ops; i++) block_free(block_new(256));
    return ops;
}

/* ---- larson: replace blocks of 10..1000 B, pass the arrays on to the next thread ---- */

enum { LARSON_SLOTS = 1000, LARSON_ROUND = 10000, LARSON_MAX_THREADS = 8 };

/* How a thread replaces `ops` random blocks of an array. */
typedef void (*replace_fn)(void **slots, size_t n, rng_t *rng, uint64_t ops);

/* Larson's: a new block of 10..1000 bytes in place of the old one. */
static void replace_small(void **slots, size_t n, rng_t *rng, uint64_t ops) {
    churn(slots, n, rng, ops, (sizes_t){ 10, 1000 });
}

/* realloc-xthread's: one time in fifty a block is resized by realloc to 0.8 KiB..5 MiB
 * (log-uniform; a block already bigger shrinks), otherwise replaced by one of 8..512 B. */
static void replace_or_grow(void **slots, size_t n, rng_t *rng, uint64_t ops) {
    const double lo = 800.0, hi = (double)(5 << 20);
    for (uint64_t i = 0; i < ops; i++) {
        void **slot = &slots[rng_below(rng, n)];
        if (*slot && rng_below(rng, 50) == 0) {
            double fraction = (double)rng_next(rng) / 18446744073709551616.0;
            *slot = block_resize(*slot, (size_t)(lo * pow(hi / lo, fraction)));
        } else {
            block_free(*slot);
            *slot = block_new(rng_between(rng, 8, 512));
        }
    }
}

typedef struct {
    replace_fn replace;
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
        l->replace(l->arrays[(t + r) % l->threads], LARSON_SLOTS, &rng, l->round);
        pthread_barrier_wait(&l->barrier);
    }
}

static uint64_t larson(uint64_t ops, size_t threads, replace_fn replace) {
    larson_t l = { .replace = replace, .threads = threads };
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

static uint64_t larson_1t(uint64_t ops) { return larson(ops, 1, replace_small); }
static uint64_t larson_2t(uint64_t ops) { return larson(ops, 2, replace_small); }
/* Eight threads: on a machine of fewer cores, threads preempted while they hold a lock. */
static uint64_t larson_8t(uint64_t ops) { return larson(ops, 8, replace_small); }
static uint64_t realloc_xthread(uint64_t ops) { return larson(ops, 2, replace_or_grow); }

/* ---- batches: allocate many objects, then free them all (benches/src/workloads/batch.rs) ---- */

/* Batch sizes in turn: mostly 10^5 objects, some 10^4 and 2 * 10^5. */
static const uint64_t BATCHES[] = { 100000, 10000, 100000, 200000 };
enum { NUM_BATCHES = sizeof BATCHES / sizeof BATCHES[0], MAX_BATCH = 200000 };

/* Mostly 16..512 B (90 %), some 512 B..4 KiB (9.9 %), a few up to 64 KiB (0.1 %). */
static size_t mixed_size(rng_t *rng) {
    size_t k = rng_below(rng, 1000);
    if (k == 0) return rng_between(rng, 4097, 64 << 10);
    if (k < 100) return rng_between(rng, 513, 4096);
    return rng_between(rng, 16, 512);
}

/* The size of the k-th batch when `*left` objects remain (0: done); takes it from `*left`. */
static size_t next_batch(uint64_t *left, size_t k) {
    return take_round(left, (size_t)BATCHES[k % NUM_BATCHES]);
}

static void allocate_batch(void **batch, size_t n, rng_t *rng) {
    for (size_t i = 0; i < n; i++) batch[i] = block_new(mixed_size(rng));
}

enum order { FORWARD, REVERSE, RANDOM };

/* Free the n blocks of `batch` in `order` (RANDOM shuffles them first, Fisher-Yates). */
static void free_batch(void **batch, size_t n, enum order order, rng_t *rng) {
    for (size_t i = n; order == RANDOM && i > 1; i--) {
        size_t j = rng_below(rng, i);
        void *x = batch[i - 1];
        batch[i - 1] = batch[j];
        batch[j] = x;
    }
    for (size_t i = 0; i < n; i++) block_free(batch[order == REVERSE ? n - 1 - i : i]);
}

static uint64_t batches(uint64_t ops, enum order order) {
    void **batch = malloc(MAX_BATCH * sizeof(void *));
    rng_t rng = rng_new(11);
    uint64_t left = ops;
    for (size_t k = 0, n; (n = next_batch(&left, k)) > 0; k++) {
        allocate_batch(batch, n, &rng);
        free_batch(batch, n, order, &rng);
    }
    free(batch);
    return ops;
}

static uint64_t batch_fwd(uint64_t ops) { return batches(ops, FORWARD); }
static uint64_t batch_rev(uint64_t ops) { return batches(ops, REVERSE); }
static uint64_t batch_rand(uint64_t ops) { return batches(ops, RANDOM); }

/* Two threads, each allocating half of every batch and freeing the other's half in
 * `order`. */
typedef struct {
    uint64_t ops;
    enum order order;
    void **halves[2];
    pthread_barrier_t barrier;
} swap_t;

static void swap_worker(size_t t, void *arg) {
    swap_t *s = arg;
    rng_t rng = rng_new(12 + t);
    uint64_t left = s->ops;
    for (size_t k = 0, n; (n = next_batch(&left, k)) > 0; k++) {
        size_t half = (n + 1) / 2;
        allocate_batch(s->halves[t], half, &rng);
        pthread_barrier_wait(&s->barrier);
        free_batch(s->halves[1 - t], half, s->order, &rng);
        /* Both have freed their batch before either puts the next one in its place. */
        pthread_barrier_wait(&s->barrier);
    }
}

static uint64_t swapped_batches(uint64_t ops, enum order order) {
    swap_t s = { .ops = ops, .order = order };
    for (size_t t = 0; t < 2; t++) s.halves[t] = malloc(MAX_BATCH / 2 * sizeof(void *));
    pthread_barrier_init(&s.barrier, NULL, 2);
    on_threads(2, swap_worker, &s);
    pthread_barrier_destroy(&s.barrier);
    uint64_t done = 0, left = ops;
    for (size_t k = 0, n; (n = next_batch(&left, k)) > 0; k++) done += 2 * ((n + 1) / 2);
    for (size_t t = 0; t < 2; t++) free(s.halves[t]);
    return done;
}

static uint64_t batch_xthread(uint64_t ops) { return swapped_batches(ops, FORWARD); }

/* Tasks that finish out of order: each thread frees the other's batch in random order. */
static uint64_t batch_xthread_rand(uint64_t ops) { return swapped_batches(ops, RANDOM); }

/* ---- producer and consumer: every free a cross-thread free (producer_consumer.rs) ---- */

/* One thread allocates blocks of 16 B..1 KiB in batches of 64, each batch an array of its
 * own, and hands them over a queue that holds 16 batches at most; the other frees every
 * block and the array. One operation is one block. */
enum { PC_BATCH = 64, PC_DEPTH = 16, QUEUE_MAX = 256 };

/* A bounded queue of pointers under a mutex, as a simple program writes one: it holds
 * `depth` (at most QUEUE_MAX) items; `done` says the sender will send no more. A send
 * wakes one receiver, a receive the sender. */
typedef struct {
    void *items[QUEUE_MAX];
    size_t head, len, depth;
    int done;
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
} pc_queue_t;

static void pc_init(pc_queue_t *q, size_t depth) {
    q->head = q->len = 0;
    q->depth = depth;
    q->done = 0;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
}

static void pc_destroy(pc_queue_t *q) {
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    pthread_mutex_destroy(&q->lock);
}

static void pc_send(pc_queue_t *q, void *item) {
    pthread_mutex_lock(&q->lock);
    while (q->len == q->depth) pthread_cond_wait(&q->not_full, &q->lock);
    q->items[(q->head + q->len++) % q->depth] = item;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

/* The next item, or NULL once the sender is done and the queue empty. */
static void *pc_receive(pc_queue_t *q) {
    pthread_mutex_lock(&q->lock);
    while (q->len == 0 && !q->done) pthread_cond_wait(&q->not_empty, &q->lock);
    void *item = NULL;
    if (q->len > 0) {
        item = q->items[q->head];
        q->head = (q->head + 1) % q->depth;
        q->len--;
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->lock);
    return item;
}

/* The sender sends no more. */
static void pc_close(pc_queue_t *q) {
    pthread_mutex_lock(&q->lock);
    q->done = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

typedef struct { pc_queue_t queue; uint64_t batches; } pc_t;

static void pc_worker(size_t t, void *arg) {
    pc_t *pc = arg;
    pc_queue_t *q = &pc->queue;
    if (t == 1) {
        for (void **batch; (batch = pc_receive(q)) != NULL;) {
            for (size_t i = 0; i < PC_BATCH; i++) block_free(batch[i]);
            free(batch);
        }
        return;
    }
    rng_t rng = rng_new(1);
    for (uint64_t b = 0; b < pc->batches; b++) {
        void **batch = malloc(PC_BATCH * sizeof(void *));
        if (!batch) abort();
        for (size_t i = 0; i < PC_BATCH; i++) batch[i] = block_new(rng_between(&rng, 16, 1024));
        pc_send(q, batch);
    }
    pc_close(q);
}

static uint64_t producer_consumer(uint64_t ops) {
    pc_t pc = { .batches = ops / PC_BATCH ? ops / PC_BATCH : 1 };
    pc_init(&pc.queue, PC_DEPTH);
    on_threads(2, pc_worker, &pc);
    pc_destroy(&pc.queue);
    return pc.batches * PC_BATCH;
}

/* ---- a thread pool serving requests (benches/src/workloads/thread_pool.rs) ---- */

/* Thread 0 accepts requests of 64..2047 B and queues them (256 at most); POOL_WORKERS
 * workers each take one, build a response of 128..8191 B with POOL_TEMPS temporaries of
 * 16..127 B, and free the temporaries, the request (a free of another thread's block) and
 * the response. One operation is one request served. */
enum { POOL_WORKERS = 4, POOL_QUEUE = 256, POOL_TEMPS = 4 };

typedef struct { pc_queue_t queue; uint64_t requests; } pool_t;

static void pool_worker(size_t t, void *arg) {
    pool_t *pool = arg;
    rng_t rng = rng_new(t);
    if (t == 0) {
        for (uint64_t i = 0; i < pool->requests; i++)
            pc_send(&pool->queue, block_new(rng_between(&rng, 64, 2047)));
        pc_close(&pool->queue);
        return;
    }
    for (void *request; (request = pc_receive(&pool->queue)) != NULL;) {
        void *response = block_new(rng_between(&rng, 128, 8191));
        void *temps[POOL_TEMPS];
        for (size_t i = 0; i < POOL_TEMPS; i++) temps[i] = block_new(rng_between(&rng, 16, 127));
        for (size_t i = 0; i < POOL_TEMPS; i++) block_free(temps[i]);
        block_free(request);
        block_free(response);
    }
}

static uint64_t thread_pool(uint64_t ops) {
    pool_t pool = { .requests = ops ? ops : 1 };
    pc_init(&pool.queue, POOL_QUEUE);
    on_threads(1 + POOL_WORKERS, pool_worker, &pool);
    pc_destroy(&pool.queue);
    return pool.requests;
}

/* ---- passive false sharing: Hoard's cache-scratch (benches/src/workloads/scratch.rs) ---- */

/* The main thread allocates one object of SCRATCH_SIZE bytes for each of SCRATCH_THREADS
 * threads (neighbours, on one cache line: scratch_neighbours); each thread frees the one
 * it was given, then allocates an object of the same size, updates every byte
 * SCRATCH_ROUNDS times and frees it, over and over. One operation is one object
 * allocated, updated and freed. */
enum { SCRATCH_THREADS = 2, SCRATCH_SIZE = 8, SCRATCH_ROUNDS = 100, SCRATCH_WARM = 16 };
enum { SCRATCH_PROBE = 64, CACHE_LINE = 64 };

/* warm: objects of the size each thread allocates and frees before it frees the one it
 * was given (c-cache-scratch-warm: a pool's worker that served requests before, its cache
 * holding blocks of its own). */
typedef struct { void *given[SCRATCH_THREADS]; uint64_t each; size_t warm; } scratch_t;

static void scratch_worker(size_t t, void *arg) {
    scratch_t *sc = arg;
    void *own[SCRATCH_WARM];
    for (size_t i = 0; i < sc->warm; i++) own[i] = block_new(SCRATCH_SIZE);
    for (size_t i = 0; i < sc->warm; i++) block_free(own[i]);
    block_free(sc->given[t]);
    for (uint64_t i = 0; i < sc->each; i++) {
        volatile unsigned char *p = block_new(SCRATCH_SIZE);
        for (int r = 0; r < SCRATCH_ROUNDS; r++)
            for (size_t k = 0; k < SCRATCH_SIZE; k++) p[k]++;
        block_free((void *)p);
    }
}

/* The objects for the threads: the first SCRATCH_THREADS made in a row that lie on one
 * cache line, out of at most SCRATCH_PROBE (the ones before them freed), so that the
 * threads share a line wherever the blocks made before left the next ones; the last ones
 * made if no such run comes (an allocator that spaces its objects apart escapes fairly). */
static void scratch_neighbours(void **given) {
    void *made[SCRATCH_PROBE];
    size_t first = 0;
    for (size_t n = 0; n < SCRATCH_PROBE; n++) {
        made[n] = block_new(SCRATCH_SIZE);
        if (n + 1 < SCRATCH_THREADS) continue;
        first = n + 1 - SCRATCH_THREADS;
        int one_line = 1;
        for (size_t k = first + 1; k <= n; k++)
            one_line &= (uintptr_t)made[k] / CACHE_LINE == (uintptr_t)made[first] / CACHE_LINE;
        if (one_line) break;
    }
    for (size_t k = 0; k < first; k++) block_free(made[k]);
    for (size_t t = 0; t < SCRATCH_THREADS; t++) given[t] = made[first + t];
}

static uint64_t scratch(uint64_t ops, size_t warm) {
    scratch_t sc = { .each = ops / SCRATCH_THREADS ? ops / SCRATCH_THREADS : 1, .warm = warm };
    scratch_neighbours(sc.given);
    on_threads(SCRATCH_THREADS, scratch_worker, &sc);
    return sc.each * SCRATCH_THREADS;
}

static uint64_t cache_scratch(uint64_t ops) { return scratch(ops, 0); }
static uint64_t cache_scratch_warm(uint64_t ops) { return scratch(ops, SCRATCH_WARM); }

/* ---- big buffers, every page written (benches/src/workloads/big.rs) ---- */

enum { MIB = 1 << 20, BIG_GROUP = 4, ZEROED_RING = 20 };

/* Groups of 4 buffers of 1..32 MiB, allocated and written, then freed together. */
static uint64_t big_buffers(uint64_t ops) {
    rng_t rng = rng_new(21);
    void *group[BIG_GROUP];
    size_t live = 0;
    for (uint64_t done = 0; done < ops; done++) {
        size_t size = rng_between(&rng, MIB, 32 * (size_t)MIB);
        group[live] = block_new(size);
        write_pages(group[live++], size);
        if (live == BIG_GROUP || done + 1 == ops)
            while (live > 0) block_free(group[--live]);
    }
    return ops;
}

/* A ring of 20 calloc'd buffers of 5..25 MiB: each op replaces the oldest, writing its pages. */
static uint64_t big_zeroed(uint64_t ops) {
    rng_t rng = rng_new(22);
    void *ring[ZEROED_RING] = { 0 };
    for (uint64_t done = 0; done < ops; done++) {
        void **slot = &ring[done % ZEROED_RING];
        block_free(*slot);
        size_t size = rng_between(&rng, 5 * (size_t)MIB, 25 * (size_t)MIB);
        *slot = block_new_zeroed(size);
        write_pages(*slot, size);
    }
    for (size_t i = 0; i < ZEROED_RING; i++) block_free(ring[i]);
    return ops;
}

/* 16 slots of 64 KiB..4 MiB, as large, every page of each buffer written. */
static uint64_t large_written(uint64_t ops) {
    enum { SLOTS = 16 };
    rng_t rng = rng_new(23);
    void *slots[SLOTS] = { 0 };
    for (uint64_t done = 0; done < ops; done++) {
        void **slot = &slots[rng_below(&rng, SLOTS)];
        block_free(*slot);
        size_t size = rng_between(&rng, 64 << 10, 4 * (size_t)MIB);
        *slot = block_new(size);
        write_pages(*slot, size);
    }
    for (size_t i = 0; i < SLOTS; i++) block_free(slots[i]);
    return ops;
}

/* 32 slots of buffers of 4 KiB..8 MiB, each sized for the largest message, of which a
 * message of 1..64 KiB is written from the start (big.rs's big_sparse). */
static uint64_t big_sparse(uint64_t ops) {
    enum { SLOTS = 32 };
    rng_t rng = rng_new(26);
    void *slots[SLOTS] = { 0 };
    for (uint64_t done = 0; done < ops; done++) {
        void **slot = &slots[rng_below(&rng, SLOTS)];
        block_free(*slot);
        size_t size = rng_between(&rng, 4 << 10, 8 * (size_t)MIB);
        size_t written = rng_between(&rng, 1 << 10, 64 << 10);
        *slot = malloc(size);
        if (!*slot) {
            fprintf(stderr, "out of memory (malloc of %zu bytes)\n", size);
            abort();
        }
        memset(*slot, (int)written, written < size ? written : size);
    }
    for (size_t i = 0; i < SLOTS; i++) block_free(slots[i]);
    return ops;
}

/* 64 slots of buffers of 1..16 MiB, every page written, then shrunk by realloc to
 * 1/32..1/2 of their size (big.rs's shrunk_buffers). */
static uint64_t shrunk_buffers(uint64_t ops) {
    enum { SLOTS = 64 };
    rng_t rng = rng_new(28);
    void *slots[SLOTS] = { 0 };
    for (uint64_t done = 0; done < ops; done++) {
        void **slot = &slots[rng_below(&rng, SLOTS)];
        block_free(*slot);
        size_t size = rng_between(&rng, MIB, 16 * (size_t)MIB);
        unsigned char *buffer = block_new(size);
        write_pages(buffer, size);
        *slot = block_resize(buffer, rng_between(&rng, size / 32, size / 2));
    }
    for (size_t i = 0; i < SLOTS; i++) block_free(slots[i]);
    return ops;
}

/* A ring of 4 zero-filled tables of 4..64 MiB, each written at 64 places at random, each
 * checked to be zero first (big.rs's sparse_zeroed). */
static uint64_t sparse_zeroed(uint64_t ops) {
    enum { RING = 4, WRITES = 64 };
    rng_t rng = rng_new(27);
    void *ring[RING] = { 0 };
    for (uint64_t done = 0; done < ops; done++) {
        void **slot = &ring[done % RING];
        block_free(*slot);
        size_t size = rng_between(&rng, 4 * (size_t)MIB, 64 * (size_t)MIB);
        unsigned char *table = block_new_zeroed(size);
        for (int k = 0; k < WRITES; k++) {
            size_t at = 1 + rng_below(&rng, size - 2);
            if (table[at] != 0) {
                fprintf(stderr, "calloc(1, %zu) was not zero-filled at %zu\n", size, at);
                abort();
            }
            table[at] = 1;
        }
        *slot = table;
    }
    for (size_t i = 0; i < RING; i++) block_free(ring[i]);
    return ops;
}

/* A ring of 64 buffers of 64 KiB..1 MiB, every page written: each operation frees the
 * oldest and allocates a new one in its place (big.rs's buffer_ring). */
static uint64_t buffer_ring(uint64_t ops) {
    enum { RING = 64 };
    rng_t rng = rng_new(24);
    void *ring[RING] = { 0 };
    for (uint64_t done = 0; done < ops; done++) {
        void **slot = &ring[done % RING];
        block_free(*slot);
        size_t size = rng_between(&rng, 64 << 10, (size_t)MIB);
        *slot = block_new(size);
        write_pages(*slot, size);
    }
    for (size_t i = 0; i < RING; i++) block_free(ring[i]);
    return ops;
}

/* Buffers of 64 KiB..1 MiB, every page written, made by one thread and handed in batches
 * of 16 to another, which keeps the last three batches it received and frees the batch
 * that leaves them (big.rs's buffer_pipeline): every free a cross-thread free of a medium
 * block. The maker waits for the free of the batch four before the one it makes: 64
 * buffers live at most. One operation is one buffer. */
enum { BP_BATCH = 16, BP_KEPT = 3 };

typedef struct { pc_queue_t batches, freed; uint64_t count; } bp_t;

static void bp_worker(size_t t, void *arg) {
    bp_t *bp = arg;
    if (t == 1) {
        void **kept[BP_KEPT + 1];
        size_t held = 0;
        for (void **batch; (batch = pc_receive(&bp->batches)) != NULL;) {
            kept[held++] = batch;
            if (held > BP_KEPT) {
                for (size_t i = 0; i < BP_BATCH; i++) block_free(kept[0][i]);
                free(kept[0]);
                memmove(kept, kept + 1, BP_KEPT * sizeof kept[0]);
                held--;
                pc_send(&bp->freed, bp); /* any non-null item */
            }
        }
        for (size_t k = 0; k < held; k++) {
            for (size_t i = 0; i < BP_BATCH; i++) block_free(kept[k][i]);
            free(kept[k]);
        }
        return;
    }
    rng_t rng = rng_new(25);
    for (uint64_t k = 0; k < bp->count; k++) {
        if (k > BP_KEPT) pc_receive(&bp->freed);
        void **batch = malloc(BP_BATCH * sizeof(void *));
        if (!batch) abort();
        for (size_t i = 0; i < BP_BATCH; i++) {
            size_t size = rng_between(&rng, 64 << 10, (size_t)MIB);
            batch[i] = block_new(size);
            write_pages(batch[i], size);
        }
        pc_send(&bp->batches, batch);
    }
    pc_close(&bp->batches);
}

static uint64_t buffer_pipeline(uint64_t ops) {
    bp_t bp = { .count = ops / BP_BATCH > BP_KEPT ? ops / BP_BATCH : BP_KEPT + 1 };
    pc_init(&bp.batches, 1);
    pc_init(&bp.freed, BP_KEPT + 1);
    on_threads(2, bp_worker, &bp);
    pc_destroy(&bp.batches);
    pc_destroy(&bp.freed);
    return bp.count * BP_BATCH;
}

static void *grow(void *p, size_t *cap, size_t len, size_t size, size_t first);

/* A program in phases, round after round: 16 buffers of 1..4 MiB read in (every page
 * written) and freed, then objects of 16..256 B built of as many bytes, and freed
 * (phase_change in big.rs). One operation is one round of both phases. */
static uint64_t phase_change(uint64_t ops) {
    enum { BUFFERS = 16 };
    rng_t rng = rng_new(24);
    for (uint64_t done = 0; done < ops; done++) {
        void *buffers[BUFFERS];
        size_t bytes = 0;
        for (size_t i = 0; i < BUFFERS; i++) {
            size_t size = rng_between(&rng, MIB, 4 * (size_t)MIB);
            buffers[i] = block_new(size);
            write_pages(buffers[i], size);
            bytes += size;
        }
        for (size_t i = 0; i < BUFFERS; i++) block_free(buffers[i]);
        void **objects = NULL;
        size_t n = 0, cap = 0;
        for (size_t built = 0; built < bytes; n++) {
            objects = grow(objects, &cap, n, sizeof *objects, 1024);
            size_t size = rng_between(&rng, 16, 256);
            objects[n] = block_new(size);
            built += size;
        }
        free_slots(objects, n);
    }
    return ops;
}

/* Buffers grown by realloc to twice their size, 4 KiB to 64 MiB, each page written as the
 * growth adds it, then freed (buffer_doubling in big.rs); one operation is one doubling. */
static uint64_t buffer_doubling(uint64_t ops) {
    enum { START = 4096 };
    uint64_t done = 0;
    while (done < ops) {
        size_t size = START;
        unsigned char *p = block_new(size);
        write_pages(p, size);
        while (size < 64 * (size_t)MIB && done < ops) {
            p = block_resize(p, 2 * size);
            write_pages(p + size, size);
            size *= 2;
            done++;
        }
        block_free(p);
    }
    return done;
}

/* ---- a buffer grown by appends (benches/src/workloads/realloc.rs's realloc_growth) ---- */

/* A byte buffer grown by appends of 1..256 bytes to 1 MiB, its capacity doubled by realloc
 * when an append does not fit (as Rust's Vec and C++'s vector grow), then freed, and the
 * next one started. One operation is one append. */
static uint64_t realloc_growth(uint64_t ops) {
    enum { TARGET = 1 << 20, FIRST = 8 };
    char text[256];
    memset(text, 'a', sizeof text);
    rng_t rng = rng_new(7);
    uint64_t done = 0;
    while (done < ops) {
        char *p = NULL;
        size_t len = 0, cap = 0;
        for (; len < TARGET && done < ops; done++) {
            size_t add = rng_between(&rng, 1, 256);
            if (len + add > cap) {
                cap = cap * 2 > len + add ? cap * 2 : len + add;
                cap = cap < FIRST ? FIRST : cap;
                p = realloc(p, cap);
                if (!p) {
                    fprintf(stderr, "out of memory (realloc of %zu bytes)\n", cap);
                    abort();
                }
            }
            memcpy(p + len, text, add);
            len += add;
        }
        sink = (unsigned char)p[len - 1];
        free(p);
    }
    return done;
}

/* ---- a live set growing to 200 MiB and shrinking (benches/src/workloads/live_growth.rs) ---- */

typedef struct { void *p; size_t size; } sized_t;

static uint64_t live_growth(uint64_t ops) {
    const size_t high = (size_t)200 << 20, low = high / 16;
    rng_t rng = rng_new(31);
    size_t len = 0, cap = 1024, bytes = 0;
    sized_t *live = malloc(cap * sizeof *live);
    int growing = 1;
    for (uint64_t done = 0; done < ops;) {
        /* Growing: allocate, and free a random block one time in four. Shrinking: free a
         * random block, and allocate one time in four. */
        if (growing || rng_below(&rng, 4) == 0) {
            if (len == cap) live = realloc(live, (cap *= 2) * sizeof *live);
            size_t size = mixed_size(&rng);
            live[len++] = (sized_t){ block_new(size), size };
            bytes += size;
            done++;
        }
        if ((!growing || rng_below(&rng, 4) == 0) && len > 0) {
            size_t i = rng_below(&rng, len);
            block_free(live[i].p);
            bytes -= live[i].size;
            live[i] = live[--len];
        }
        if ((growing && bytes >= high) || (!growing && bytes <= low)) growing = !growing;
    }
    while (len > 0) block_free(live[--len].p);
    free(live);
    return ops;
}

/* ---- a document tree built, written out, parsed back, dropped (benches/src/workloads/tree.rs) ---- */

enum { TREE_ROUND = 200000, TREE_MAX_DEPTH = 6 };
enum { V_NUM, V_STR, V_LIST, V_MAP };

/* A value: `p` holds a string's bytes, a list's values or a map's entries (`len` of them,
 * room for `cap`): 32 bytes, as the Rust enum. */
typedef struct value { uint32_t kind, num; void *p; size_t len, cap; } value_t;
typedef struct { char *key; size_t klen, kcap; value_t v; } entry_t;
typedef struct { char *p; size_t len, cap; } text_t;

static const char *const TREE_KEYS[16] = {
    "id", "name", "type", "value", "items", "children", "label", "count", "enabled", "tags",
    "x", "y", "width", "height", "description", "metadata",
};

/* Room for one more of `size`-byte elements in `p` (`len` used of `cap`): doubled from
 * `first` when full, as a Rust Vec grows (8 for bytes, 4 for the others). */
static void *grow(void *p, size_t *cap, size_t len, size_t size, size_t first) {
    if (len < *cap) return p;
    *cap = *cap ? *cap * 2 : first;
    p = realloc(p, *cap * size);
    if (!p) abort();
    return p;
}

static value_t tree_build(rng_t *rng, size_t depth, uint64_t *left) {
    (*left)--;
    int container = depth < TREE_MAX_DEPTH && rng_below(rng, 3) == 0;
    size_t which = rng_below(rng, 2);
    value_t v = { 0 };
    if (container && which == 0) {
        v.kind = V_LIST;
        for (size_t i = 0, n = rng_below(rng, 13); i < n && *left > 0; i++) {
            value_t item = tree_build(rng, depth + 1, left);
            v.p = grow(v.p, &v.cap, v.len, sizeof(value_t), 4);
            ((value_t *)v.p)[v.len++] = item;
        }
    } else if (container) {
        v.kind = V_MAP;
        for (size_t i = 0, n = 1 + rng_below(rng, 8); i < n && *left > 0; i++) {
            const char *k = TREE_KEYS[rng_below(rng, 16)];
            entry_t e = { .klen = strlen(k) };
            e.kcap = e.klen;
            e.key = malloc(e.klen);
            if (!e.key) abort();
            memcpy(e.key, k, e.klen);
            e.v = tree_build(rng, depth + 1, left);
            v.p = grow(v.p, &v.cap, v.len, sizeof(entry_t), 4);
            ((entry_t *)v.p)[v.len++] = e;
        }
    } else if (which == 0) {
        v.kind = V_NUM;
        v.num = (uint32_t)rng_next(rng);
    } else {
        v.kind = V_STR;
        v.len = v.cap = 1 + rng_below(rng, 40);
        char *s = malloc(v.len);
        if (!s) abort();
        for (size_t i = 0; i < v.len; i++) s[i] = (char)('a' + rng_below(rng, 26));
        v.p = s;
    }
    return v;
}

/* Append `n` bytes, growing as a Rust String does (at least doubled, at least 8). */
static void text_put(text_t *t, const char *bytes, size_t n) {
    if (t->len + n > t->cap) {
        size_t cap = t->cap * 2 > t->len + n ? t->cap * 2 : t->len + n;
        t->cap = cap < 8 ? 8 : cap;
        t->p = realloc(t->p, t->cap);
        if (!t->p) abort();
    }
    memcpy(t->p + t->len, bytes, n);
    t->len += n;
}

static void tree_write(const value_t *v, text_t *out) {
    char num[16];
    switch (v->kind) {
    case V_NUM: text_put(out, num, (size_t)snprintf(num, sizeof num, "%u", v->num)); break;
    case V_STR:
        text_put(out, "\"", 1);
        text_put(out, v->p, v->len);
        text_put(out, "\"", 1);
        break;
    case V_LIST:
        text_put(out, "[", 1);
        for (size_t i = 0; i < v->len; i++) {
            if (i > 0) text_put(out, ",", 1);
            tree_write(&((value_t *)v->p)[i], out);
        }
        text_put(out, "]", 1);
        break;
    default:
        text_put(out, "{", 1);
        for (size_t i = 0; i < v->len; i++) {
            const entry_t *e = &((entry_t *)v->p)[i];
            if (i > 0) text_put(out, ",", 1);
            text_put(out, "\"", 1);
            text_put(out, e->key, e->klen);
            text_put(out, "\":", 2);
            tree_write(&e->v, out);
        }
        text_put(out, "}", 1);
    }
}

typedef struct { const char *text; size_t len, at; } parser_t;

static void expect(parser_t *ps, char c) {
    if (ps->text[ps->at] != c) abort();
    ps->at++;
}

/* A quoted string, grown byte by byte. */
static char *parse_string(parser_t *ps, size_t *len, size_t *cap) {
    char *s = NULL;
    *len = *cap = 0;
    expect(ps, '"');
    while (ps->text[ps->at] != '"') {
        s = grow(s, cap, *len, 1, 8);
        s[(*len)++] = ps->text[ps->at++];
    }
    ps->at++;
    return s;
}

static value_t tree_parse(parser_t *ps) {
    value_t v = { 0 };
    char c = ps->text[ps->at];
    if (c == '"') {
        v.kind = V_STR;
        v.p = parse_string(ps, &v.len, &v.cap);
    } else if (c == '[') {
        v.kind = V_LIST;
        ps->at++;
        while (ps->text[ps->at] != ']') {
            if (v.len > 0) expect(ps, ',');
            value_t item = tree_parse(ps);
            v.p = grow(v.p, &v.cap, v.len, sizeof(value_t), 4);
            ((value_t *)v.p)[v.len++] = item;
        }
        ps->at++;
    } else if (c == '{') {
        v.kind = V_MAP;
        ps->at++;
        while (ps->text[ps->at] != '}') {
            if (v.len > 0) expect(ps, ',');
            entry_t e;
            e.key = parse_string(ps, &e.klen, &e.kcap);
            expect(ps, ':');
            e.v = tree_parse(ps);
            v.p = grow(v.p, &v.cap, v.len, sizeof(entry_t), 4);
            ((entry_t *)v.p)[v.len++] = e;
        }
        ps->at++;
    } else {
        v.kind = V_NUM;
        while (ps->at < ps->len && ps->text[ps->at] >= '0' && ps->text[ps->at] <= '9')
            v.num = v.num * 10 + (uint32_t)(ps->text[ps->at++] - '0');
    }
    return v;
}

static uint64_t tree_count(const value_t *v) {
    uint64_t n = 1;
    for (size_t i = 0; v->kind == V_LIST && i < v->len; i++) n += tree_count(&((value_t *)v->p)[i]);
    for (size_t i = 0; v->kind == V_MAP && i < v->len; i++) n += tree_count(&((entry_t *)v->p)[i].v);
    return n;
}

/* Freed in the order a Rust drop takes: each element before its container's array. */
static void tree_free(value_t *v) {
    for (size_t i = 0; v->kind == V_LIST && i < v->len; i++) tree_free(&((value_t *)v->p)[i]);
    for (size_t i = 0; v->kind == V_MAP && i < v->len; i++) {
        entry_t *e = &((entry_t *)v->p)[i];
        free(e->key);
        tree_free(&e->v);
    }
    free(v->p);
}

static uint64_t tree(uint64_t ops) {
    rng_t rng = rng_new(41);
    for (uint64_t done = 0; done < ops;) {
        uint64_t n = ops - done < TREE_ROUND ? ops - done : TREE_ROUND, left = n;
        value_t doc = { .kind = V_LIST };
        while (left > 0) {
            value_t item = tree_build(&rng, 0, &left);
            doc.p = grow(doc.p, &doc.cap, doc.len, sizeof(value_t), 4);
            ((value_t *)doc.p)[doc.len++] = item;
        }
        text_t text = { 0 };
        tree_write(&doc, &text);
        parser_t ps = { text.p, text.len, 0 };
        value_t parsed = tree_parse(&ps);
        if (ps.at != text.len || tree_count(&parsed) != n + 1) abort();
        tree_free(&doc);
        tree_free(&parsed);
        free(text.p);
        done += n;
    }
    return ops;
}

/* ---- many strings grown at once, each to exactly its length (realloc.rs's string_builders) ---- */

/* 1000 strings built by appends of 1..64 bytes, one picked at random for each, every append
 * growing it by realloc to exactly its new length; one that would pass 64 KiB is freed and
 * started again. One operation is one append. */
static uint64_t string_builders(uint64_t ops) {
    enum { STRINGS = 1000, MAX = 64 << 10 };
    rng_t rng = rng_new(24);
    char *strings[STRINGS] = { 0 };
    size_t lens[STRINGS] = { 0 };
    for (uint64_t i = 0; i < ops; i++) {
        size_t k = rng_below(&rng, STRINGS);
        size_t add = rng_between(&rng, 1, 64);
        if (lens[k] + add > MAX) {
            free(strings[k]);
            strings[k] = NULL;
            lens[k] = 0;
            continue;
        }
        char *s = realloc(strings[k], lens[k] + add);
        if (!s) {
            fprintf(stderr, "out of memory (realloc of %zu bytes)\n", lens[k] + add);
            abort();
        }
        memset(s + lens[k], 'a' + (int)(add % 26), add);
        strings[k] = s;
        lens[k] += add;
    }
    for (size_t k = 0; k < STRINGS; k++) free(strings[k]);
    return ops;
}

/* ---- half freed: 48-byte objects, every other one freed, the holes refilled (batch.rs) ---- */

/* Two thirds of the operations are 48-byte objects allocated in order; every other one is
 * freed, the holes refilled with objects of 64..256 B, then all are freed. */
static uint64_t half_freed(uint64_t ops) {
    size_t first = ops * 2 / 3 < 2 ? 2 : (size_t)(ops * 2 / 3);
    rng_t rng = rng_new(25);
    void **objects = malloc(first * sizeof(void *));
    if (!objects) abort();
    for (size_t i = 0; i < first; i++) objects[i] = block_new(48);
    for (size_t i = 0; i < first; i += 2) block_free(objects[i]);
    for (size_t i = 0; i < first; i += 2) objects[i] = block_new(rng_between(&rng, 64, 256));
    for (size_t i = 0; i < first; i++) block_free(objects[i]);
    free(objects);
    return first + (first + 1) / 2;
}

/* ---- a linked list rebuilt after a shuffled free (benches/src/workloads/list.rs) ---- */

enum { LIST_ROUND = 100000, LIST_WALKS = 4 };

/* A record: a link and three words, 32 bytes. */
typedef struct record { const struct record *next; uint64_t value, payload[2]; } record_t;

static uint64_t list_walk(const record_t *p) {
    uint64_t sum = 0;
    for (; p; p = p->next) sum += p->value;
    return sum;
}

/* The phases of a round, apart so that `--phases` can time them one by one (static
 * functions the compiler inlines: the row runs the same code as one loop). */
static const record_t *list_build(record_t **records, size_t n) {
    const record_t *head = NULL;
    for (size_t i = 0; i < n; i++) {
        record_t *r = malloc(sizeof *r);
        if (!r) abort();
        *r = (record_t){ head, i, { i, i } };
        records[i] = r;
        head = r;
    }
    return head;
}

static void list_walks(const record_t *head, uint64_t *sum) {
    for (int w = 0; w < LIST_WALKS; w++) *sum += list_walk(head);
}

static void list_shuffle(record_t **records, size_t n, rng_t *rng) {
    for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = rng_below(rng, i + 1);
        record_t *x = records[i];
        records[i] = records[j];
        records[j] = x;
    }
}

static void list_free(record_t **records, size_t n) {
    for (size_t i = 0; i < n; i++) free(records[i]);
}

/* A list of records built, walked LIST_WALKS times and freed in random order, round
 * after round: where the next round's records lie decides how fast its walks are. */
static uint64_t list_rebuild(uint64_t ops) {
    record_t **records = malloc(LIST_ROUND * sizeof(record_t *));
    if (!records) abort();
    rng_t rng = rng_new(31);
    uint64_t sum = 0;
    for (uint64_t left = ops; left > 0;) {
        size_t n = take_round(&left, LIST_ROUND);
        const record_t *head = list_build(records, n);
        list_walks(head, &sum);
        list_shuffle(records, n, &rng);
        list_free(records, n);
    }
    free(records);
    sink = (unsigned char)sum;
    return ops;
}

/* ---- a hash table torn down: chains freed as they are walked (hash_table.rs) ---- */

enum { HASH_ROUND = 200000 };

/* An entry: a link, a key, and its value in a block of its own (8..47 bytes). */
typedef struct entry { struct entry *next; uint64_t key; unsigned char *value; } hentry_t;

static size_t hash_bucket(uint64_t key, unsigned bits) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

/* A table of 2^bits empty chains, zeroed by calloc. */
static hentry_t **hash_table(unsigned bits) {
    hentry_t **t = calloc((size_t)1 << bits, sizeof *t);
    if (!t) abort();
    return t;
}

/* The chains of `old` (2^bits buckets) moved into a zeroed table twice as long, which
 * replaces it. */
static hentry_t **hash_grow(hentry_t **old, unsigned bits) {
    hentry_t **t = hash_table(bits + 1);
    for (size_t j = 0; j < (size_t)1 << bits; j++)
        for (hentry_t *e = old[j], *next; e; e = next) {
            next = e->next;
            size_t h = hash_bucket(e->key, bits + 1);
            e->next = t[h];
            t[h] = e;
        }
    free(old);
    return t;
}

/* A chained hash table of `n` entries with random keys, grown by doubling from 16
 * buckets as it fills (a new zeroed table each time); its bucket count's log in `*bits`. */
static hentry_t **hash_build(size_t n, rng_t *rng, unsigned *bits) {
    *bits = 4;
    hentry_t **t = hash_table(*bits);
    for (size_t i = 0; i < n; i++) {
        hentry_t *e = malloc(sizeof *e);
        if (!e) abort();
        e->key = rng_next(rng);
        e->value = block_new(rng_between(rng, 8, 47));
        size_t h = hash_bucket(e->key, *bits);
        e->next = t[h];
        t[h] = e;
        if (i + 1 > (size_t)1 << *bits) {
            t = hash_grow(t, *bits);
            ++*bits;
        }
    }
    return t;
}

/* The table of 2^bits buckets torn down bucket by bucket, each entry's link read before
 * its value and the entry are freed: the teardown of a symbol table, a cache, a C++
 * `unordered_map`. Entries of one chain were made at unrelated times, so the frees come
 * in no order of address. Chains are short (at most one entry a bucket on average), so
 * the next bucket's entry seldom waits on this one's: the CPU runs ahead to its load as
 * far as the instructions of the frees between leave it room. */
static uint64_t hash_free(hentry_t **t, unsigned bits) {
    uint64_t sum = 0;
    for (size_t j = 0; j < (size_t)1 << bits; j++)
        for (hentry_t *e = t[j], *next; e; e = next) {
            next = e->next;
            sum += e->key;
            block_free(e->value);
            free(e);
        }
    free(t);
    return sum;
}

/* One round, its two phases apart so that `--phases` can time them (static functions the
 * compiler inlines, as the list's). */
static uint64_t hash_round(size_t n, rng_t *rng) {
    unsigned bits;
    hentry_t **t = hash_build(n, rng, &bits);
    return hash_free(t, bits);
}

static uint64_t hash_teardown(uint64_t ops) {
    rng_t rng = rng_new(43);
    uint64_t sum = 0;
    for (uint64_t left = ops; left > 0;) {
        size_t n = take_round(&left, HASH_ROUND);
        sum += hash_round(n, &rng);
    }
    sink = (unsigned char)sum;
    return ops;
}

/* ---- a queue: the oldest block freed, a new one in its place (churn.rs's fifo) ---- */

/* A ring of 250K slots of 16..512 bytes taken in turn: each operation frees the oldest
 * block and allocates a new one in its place (a queue, a sliding window, an LRU cache). */
static uint64_t fifo(uint64_t ops) {
    enum { RING = 250000 };
    void **ring = calloc(RING, sizeof(void *));
    if (!ring) abort();
    rng_t rng = rng_new(0);
    for (uint64_t i = 0; i < ops; i++) {
        void **slot = &ring[i % RING];
        block_free(*slot);
        *slot = block_new(rng_between(&rng, 16, 512));
    }
    free_slots(ring, RING);
    return ops;
}

/* ---- a table: a random one of 250K short strings replaced (churn.rs's table) ---- */

/* 250K slots of 2..42 bytes, one freed at random and allocated again at each operation
 * (a symbol table, a cache keyed by name, an interpreter's heap of small objects). */
static size_t short_string_size(rng_t *rng) { return rng_between(rng, 2, 42); }

static uint64_t table_churn(uint64_t ops) { return churn_sized(ops, 250000, short_string_size); }

/* ---- connection buffers: sized for the largest message, written in part (churn.rs) ---- */

/* `n` connections, each with a buffer of `smallest` bytes, twice or four times that,
 * holding a message of lo..hi bytes written from its start; at each operation one
 * connection closes and another opens (the first `n` operations open them). */
static uint64_t connections(uint64_t ops, size_t n, size_t smallest, size_t lo, size_t hi) {
    unsigned char **slots = calloc(n, sizeof *slots);
    if (!slots) abort();
    rng_t rng = rng_new(0);
    for (uint64_t i = 0; i < ops; i++) {
        size_t k = i < n ? (size_t)i : rng_below(&rng, n);
        size_t size = smallest << rng_below(&rng, 3);
        size_t written = rng_between(&rng, lo, hi);
        block_free(slots[k]);
        slots[k] = malloc(size);
        if (!slots[k]) {
            fprintf(stderr, "out of memory (malloc of %zu bytes)\n", size);
            abort();
        }
        memset(slots[k], (int)written, written);
    }
    free_slots((void **)slots, n);
    return ops;
}

/* A server's 5000 connections with receive buffers of 16, 32 or 64 KiB, messages of
 * 200..4000 B. */
static uint64_t conn_buffers(uint64_t ops) { return connections(ops, 5000, 16 << 10, 200, 4000); }

/* 20,000 connections with buffers of 2, 4 or 8 KiB, messages of 100..600 B. */
static uint64_t conn_buffers_small(uint64_t ops) {
    return connections(ops, 20000, 2 << 10, 100, 600);
}

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
    { "c-wide-churn", 5000000, wide_churn },
    { "c-producer-consumer", 10000000, producer_consumer },
    { "c-realloc-growth", 5000000, realloc_growth },
    { "c-large", 300000, large },
    { "c-thread-churn", 5000000, thread_churn },
    { "c-many-threads", 8000000, many_threads },
    { "c-pages", 5000000, pages },
    { "c-batch-fwd", 1000000, batch_fwd },
    { "c-batch-rev", 1000000, batch_rev },
    { "c-batch-rand", 1000000, batch_rand },
    { "c-batch-xthread", 1000000, batch_xthread },
    { "c-batch-xthread-rand", 1000000, batch_xthread_rand },
    { "c-big-buffers", 64, big_buffers },
    { "c-big-zeroed", 64, big_zeroed },
    { "c-large-written", 20000, large_written },
    { "c-big-sparse", 20000, big_sparse },
    { "c-sparse-zeroed", 200, sparse_zeroed },
    { "c-shrunk-buffers", 500, shrunk_buffers },
    { "c-phase-change", 6, phase_change },
    { "c-buffer-doubling", 280, buffer_doubling },
    { "c-live-growth", 1000000, live_growth },
    { "c-tree", 1000000, tree },
    { "c-realloc-xthread", 3000000, realloc_xthread },
    { "c-string-builders", 2000000, string_builders },
    { "c-half-freed", 1500000, half_freed },
    { "c-aligned", 10000000, aligned },
    { "c-io-buffers", 5000000, io_buffers },
    { "c-usable-growth", 6000000, usable_growth },
    { "c-list-rebuild", 1000000, list_rebuild },
    { "c-hash-teardown", 1000000, hash_teardown },
    { "c-fifo", 5000000, fifo },
    { "c-table-churn", 5000000, table_churn },
    { "c-conn-buffers", 300000, conn_buffers },
    { "c-conn-buffers-small", 300000, conn_buffers_small },
    { "c-larson-8t", 10000000, larson_8t },
    { "c-thread-pool", 300000, thread_pool },
    { "c-buffer-ring", 50000, buffer_ring },
    { "c-buffer-pipeline", 20000, buffer_pipeline },
    { "c-cache-scratch", 200000, cache_scratch },
    { "c-cache-scratch-warm", 200000, cache_scratch_warm },
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

static double tv_secs(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

/* The timed part's CPU time and minor page faults go on the RESULT line with its time, as
 * the Rust binaries' do (benches/src/usage.rs): a slow run with the usual faults and its
 * extra time in the kernel waited on the memory it faulted in. */
static int run(const workload_t *w, uint64_t ops) {
    w->run(ops / WARM_UP_DIVISOR ? ops / WARM_UP_DIVISOR : 1);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    double start = now_secs();
    uint64_t done = w->run(ops);
    double secs = now_secs() - start;
    getrusage(RUSAGE_SELF, &after);
    printf("RESULT workload=%s ops=%llu secs=%.9f peak_rss_kb=%ld user_secs=%.6f sys_secs=%.6f "
           "minor_faults=%ld\n",
           w->name, (unsigned long long)done, secs, peak_rss_kb(),
           tv_secs(after.ru_utime) - tv_secs(before.ru_utime),
           tv_secs(after.ru_stime) - tv_secs(before.ru_stime),
           after.ru_minflt - before.ru_minflt);
    return 0;
}

/* Add the `phases` spans between the times `t[0..phases]` to the sums `ms`, unless this is
 * the first round (`rounds` before it 0), which faults its memory in. */
static void add_phases(double *ms, const double *t, int phases, uint64_t rounds) {
    for (int k = 0; rounds > 0 && k < phases; k++) ms[k] += (t[k + 1] - t[k]) * 1e3;
}

/* `--phases c-list-rebuild [OPS]`: the row's rounds with each phase timed apart, summed
 * over every round but the first (which faults its memory in), in milliseconds: where the
 * row's time goes, for one allocator at a time. OPS is 4M unless given: 40 rounds, four
 * times the row's, so that the sums outweigh the clock's reads. */
enum { PHASES_DEFAULT_OPS = 4000000 };

static int list_rebuild_phases(uint64_t ops) {
    record_t **records = malloc(LIST_ROUND * sizeof(record_t *));
    if (!records) abort();
    rng_t rng = rng_new(31);
    uint64_t sum = 0, rounds = 0;
    double ms[4] = { 0 };
    for (uint64_t left = ops; left > 0; rounds++) {
        size_t n = take_round(&left, LIST_ROUND);
        double t[5];
        t[0] = now_secs();
        const record_t *head = list_build(records, n);
        t[1] = now_secs();
        list_walks(head, &sum);
        t[2] = now_secs();
        list_shuffle(records, n, &rng);
        t[3] = now_secs();
        list_free(records, n);
        t[4] = now_secs();
        add_phases(ms, t, 4, rounds);
    }
    free(records);
    sink = (unsigned char)sum;
    printf("PHASES workload=c-list-rebuild rounds=%llu build_ms=%.2f walks_ms=%.2f "
           "shuffle_ms=%.2f free_ms=%.2f\n",
           (unsigned long long)(rounds > 0 ? rounds - 1 : 0), ms[0], ms[1], ms[2], ms[3]);
    return 0;
}

/* `--phases c-hash-teardown [OPS]`: the row's rounds with the build and the teardown
 * timed apart, summed over every round but the first, in milliseconds. OPS is 4M unless
 * given: 20 rounds, four times the row's. */
static int hash_teardown_phases(uint64_t ops) {
    rng_t rng = rng_new(43);
    uint64_t sum = 0, rounds = 0;
    double ms[2] = { 0 };
    for (uint64_t left = ops; left > 0; rounds++) {
        size_t n = take_round(&left, HASH_ROUND);
        unsigned bits;
        double t[3];
        t[0] = now_secs();
        hentry_t **table = hash_build(n, &rng, &bits);
        t[1] = now_secs();
        sum += hash_free(table, bits);
        t[2] = now_secs();
        add_phases(ms, t, 2, rounds);
    }
    sink = (unsigned char)sum;
    printf("PHASES workload=c-hash-teardown rounds=%llu build_ms=%.2f free_ms=%.2f\n",
           (unsigned long long)(rounds > 0 ? rounds - 1 : 0), ms[0], ms[1]);
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
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "--phases") == 0) {
        uint64_t ops = argc == 4 ? strtoull(argv[3], NULL, 10) : PHASES_DEFAULT_OPS;
        if (strcmp(argv[2], "c-list-rebuild") == 0) return list_rebuild_phases(ops);
        if (strcmp(argv[2], "c-hash-teardown") == 0) return hash_teardown_phases(ops);
    }
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: c-workloads --list | --which-malloc | --phases "
                        "c-list-rebuild|c-hash-teardown [OPS] | WORKLOAD [OPS]\n");
        return 2;
    }
    for (size_t i = 0; i < NUM_WORKLOADS; i++)
        if (strcmp(argv[1], WORKLOADS[i].name) == 0)
            return run(&WORKLOADS[i],
                       argc == 3 ? strtoull(argv[2], NULL, 10) : WORKLOADS[i].default_ops);
    fprintf(stderr, "unknown workload %s; --list shows them\n", argv[1]);
    return 2;
}
