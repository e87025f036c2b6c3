/* Threads: blocks allocated on one thread and freed on another, thread exit, fork. */
#include "check.h"
#include "hakmem.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

static size_t size_for(uint64_t *seed) {
    *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t r = *seed >> 33;
    if (r % 100 == 0) return 65536 + r % 300000; /* a few large blocks */
    return r % 2048;
}

/* ---- cross-thread free: producers allocate and fill, consumers check and free ---- */

enum { PRODUCERS = 4, CONSUMERS = 4, PER_PRODUCER = 50000, RING = 1024 };

struct item {
    unsigned char *p;
    size_t size;
    unsigned char tag;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    struct item ring[RING];
    size_t head, tail;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0}}, 0, 0};

static void push(struct item it) {
    pthread_mutex_lock(&q.lock);
    while (q.tail - q.head == RING) pthread_cond_wait(&q.not_full, &q.lock);
    q.ring[q.tail++ % RING] = it;
    pthread_cond_signal(&q.not_empty);
    pthread_mutex_unlock(&q.lock);
}

static struct item pop(void) {
    pthread_mutex_lock(&q.lock);
    while (q.tail == q.head) pthread_cond_wait(&q.not_empty, &q.lock);
    struct item it = q.ring[q.head++ % RING];
    pthread_cond_signal(&q.not_full);
    pthread_mutex_unlock(&q.lock);
    return it;
}

static void *producer(void *arg) {
    uint64_t seed = (uintptr_t)arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        size_t size = size_for(&seed);
        unsigned char tag = (unsigned char)(seed >> 17);
        unsigned char *p = malloc(size);
        CHECK(p != NULL);
        memset(p, tag, size);
        push((struct item){p, size, tag});
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        struct item it = pop();
        if (it.p == NULL) return NULL;
        for (size_t k = 0; k < it.size; k++) CHECK(it.p[k] == it.tag);
        if (it.size % 3 == 0) it.p = realloc(it.p, it.size + 100); /* moved across threads too */
        free(it.p);
    }
}

static void cross_thread_free(void) {
    pthread_t prod[PRODUCERS], cons[CONSUMERS];
    for (int i = 0; i < CONSUMERS; i++) pthread_create(&cons[i], NULL, consumer, NULL);
    for (int i = 0; i < PRODUCERS; i++) pthread_create(&prod[i], NULL, producer, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < PRODUCERS; i++) pthread_join(prod[i], NULL);
    for (int i = 0; i < CONSUMERS; i++) push((struct item){NULL, 0, 0});
    for (int i = 0; i < CONSUMERS; i++) pthread_join(cons[i], NULL);
}

/* ---- thread exit: each thread's memory comes back for the next ones ---- */

static HakmemStats stats(void) {
    HakmemStats (*f)(void) = (HakmemStats (*)(void))dlsym(RTLD_DEFAULT, "hakmem_stats");
    CHECK(f != NULL);
    return f();
}

enum { KEEP = 64 };
static void *kept[2000][KEEP];

static void *short_lived(void *arg) {
    uintptr_t id = (uintptr_t)arg;
    uint64_t seed = id + 1;
    void *tmp[1000];
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 1000; i++) tmp[i] = malloc(size_for(&seed) % 4000);
        for (int i = 0; i < 1000; i++) free(tmp[i]);
    }
    /* Some blocks outlive the thread: the main thread frees them later. */
    for (int i = 0; i < KEEP; i++) kept[id][i] = malloc(size_for(&seed) % 4000);
    return NULL;
}

static void thread_exit_returns_memory(void) {
    size_t mapped_after_first_batch = 0;
    for (int batch = 0; batch < 250; batch++) {
        pthread_t t[8];
        for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, short_lived, (void *)(uintptr_t)(batch * 8 + i));
        for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
        for (int i = 0; i < 8; i++)
            for (int k = 0; k < KEEP; k++) free(kept[batch * 8 + i][k]);
        if (batch == 0) mapped_after_first_batch = stats().mapped;
    }
    /* 2000 threads came and went; had each kept its memory, hakmem would have mapped
     * gigabytes. Reuse keeps it near what one batch needed. */
    HakmemStats s = stats();
    fprintf(stderr, "mapped after one batch %zu, after 250 %zu\n", mapped_after_first_batch, s.mapped);
    CHECK(s.mapped <= mapped_after_first_batch + (64u << 20));
}

/* ---- a pthread key destructor that allocates, after hakmem's own ran ---- */

static pthread_key_t key;

static void destructor(void *v) {
    /* Possibly this thread's first allocation, or one after hakmem's thread exit hook. */
    char *s = malloc(100);
    CHECK(s != NULL);
    strcpy(s, "destructor");
    char *d = strdup(s);
    free(s);
    free(d);
    if ((uintptr_t)v < 3) pthread_setspecific(key, (void *)((uintptr_t)v + 1)); /* again */
}

static void *allocates_then_sets_key(void *arg) {
    free(malloc(50));
    pthread_setspecific(key, arg);
    return NULL;
}

static void *only_sets_key(void *arg) {
    pthread_setspecific(key, arg); /* no allocation before the destructor's */
    return NULL;
}

static void key_destructor_allocates(void) {
    CHECK(pthread_key_create(&key, destructor) == 0);
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        pthread_create(&t, NULL, i % 2 ? allocates_then_sets_key : only_sets_key, (void *)(uintptr_t)1);
        pthread_join(t, NULL);
    }
}

/* ---- fork while other threads allocate ---- */

static volatile int stop;

static void *churn(void *arg) {
    uint64_t seed = (uintptr_t)arg;
    void *slot[256] = {0};
    while (!stop) {
        int i = (int)(seed % 256);
        free(slot[i]);
        slot[i] = malloc(size_for(&seed));
    }
    for (int i = 0; i < 256; i++) free(slot[i]);
    return NULL;
}

static void *child_thread(void *arg) {
    free(malloc((size_t)(uintptr_t)arg));
    return NULL;
}

static void child_work(void) {
    alarm(20); /* a deadlock kills the child, and the parent sees it */
    uint64_t seed = (uint64_t)getpid();
    void *p[1000];
    for (int i = 0; i < 1000; i++) p[i] = malloc(size_for(&seed));
    for (int i = 0; i < 1000; i++) free(p[i]);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)100000) == 0);
    pthread_join(t, NULL);
    exit(0);
}

static void fork_with_threads(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 7));
    for (int i = 0; i < 40; i++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) child_work();
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "child %d: status %#x\n", i, status);
            exit(1);
        }
    }
    stop = 1;
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

int main(int argc, char **argv) {
    static const struct named_case cases[] = {
        {"cross_thread_free", cross_thread_free},
        {"thread_exit_returns_memory", thread_exit_returns_memory},
        {"key_destructor_allocates", key_destructor_allocates},
        {"fork_with_threads", fork_with_threads},
        {NULL, NULL},
    };
    return run_named(argc, argv, cases);
}
