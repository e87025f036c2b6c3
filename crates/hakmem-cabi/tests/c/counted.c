/* For HAKMEM_STATS=1 (tests/env.rs): 10000 blocks of 64 bytes allocated and freed, so
 * that the exit summary must count 20000 calls more than the C runtime's and about no
 * bytes in use, however `free` finds the blocks. */
#include <stdio.h>
#include <stdlib.h>

enum { N = 10000 };

int main(void) {
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(64);
        if (!blocks[i]) return 1;
    }
    for (int i = 0; i < N; i++) free(blocks[i]);
    return 0;
}
