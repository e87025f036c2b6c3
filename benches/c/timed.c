/* Run a program and report its wall time and peak RSS, for `cargo xtask programs`.
 *
 *   timed RESULT_FILE PROGRAM [ARGS...]
 *
 * Forks, sets LD_PRELOAD in the child to $TIMED_PRELOAD (or removes it when that is unset
 * or empty), execs PROGRAM, waits with wait4 and writes one line to RESULT_FILE:
 * `secs=S max_rss_kb=K status=W` (W the raw wait status). The program inherits stdin,
 * stdout and stderr.
 *
 * Why a separate program: a process started by exec keeps, in its `ru_maxrss`, the peak
 * RSS of the process it replaced. The harness has touched 512 MiB before each run, and
 * Rust spawns with vfork, so a program it started itself would report at least that.
 * This one is small, and its forked child starts from its few pages. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: timed RESULT_FILE PROGRAM [ARGS...]\n");
        return 2;
    }
    FILE *result = fopen(argv[1], "w");
    if (!result) {
        perror(argv[1]);
        return 2;
    }
    const char *preload = getenv("TIMED_PRELOAD");
    double start = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0) {
        if (preload && *preload)
            setenv("LD_PRELOAD", preload, 1);
        else
            unsetenv("LD_PRELOAD");
        unsetenv("TIMED_PRELOAD");
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) {
        perror("wait4");
        return 2;
    }
    double secs = now() - start;
    fprintf(result, "secs=%.6f max_rss_kb=%ld status=%d\n", secs, usage.ru_maxrss, status);
    return fclose(result) == 0 ? 0 : 2;
}
