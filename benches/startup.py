#!/usr/bin/env python3
"""What preloading an allocator costs a process's start (docs/ARCHITECTURE.md, "Start-up").

usage: LIBS="glibc=none hakmem=target/release/libhakmem.so ..." \\
       python3 benches/startup.py ROUNDS N COMMAND [ARG...]

Each round starts COMMAND N times, one after another (posix_spawn, stdin and stdout on
/dev/null), under each library of LIBS in turn (`none`: no preload), the order reversed
every other round. Prints, per library, the median milliseconds a process over the
rounds, their range, the ratio to the fastest, and the minor page faults a process
(`getrusage(RUSAGE_CHILDREN)`, of the last round).
"""
import os
import resource
import statistics
import sys
import time


def main():
    rounds, n, cmd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    libs = [entry.split("=", 1) for entry in os.environ["LIBS"].split()]
    ms = {name: [] for name, _ in libs}
    faults = {}
    devnull = os.open("/dev/null", os.O_RDWR)
    quiet = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1)]
    for r in range(rounds):
        for name, lib in libs if r % 2 == 0 else libs[::-1]:
            env = {k: v for k, v in os.environ.items() if k != "LIBS"}
            if lib != "none":
                env["LD_PRELOAD"] = lib
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
            start = time.perf_counter()
            for _ in range(n):
                pid = os.posix_spawnp(cmd[0], cmd, env, file_actions=quiet)
                os.waitpid(pid, 0)
            ms[name].append((time.perf_counter() - start) / n * 1e3)
            after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
            faults[name] = (after - before) / n
    best = min(statistics.median(v) for v in ms.values())
    for name, _ in libs:
        v = ms[name]
        m = statistics.median(v)
        print(f"{name:10} {m:.3f} ms ({min(v):.3f}..{max(v):.3f}) {m / best:.3f}x"
              f"  faults {faults[name]:.0f}")


if __name__ == "__main__":
    main()
