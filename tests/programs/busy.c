/* Runs until killed (or for argv[1] seconds): maps 64 MiB and keeps re-touching it, releasing
 * pages with madvise(MADV_DONTNEED) so that every pass faults again. Prints "ready" once. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv) {
    double limit = argc > 1 ? atof(argv[1]) : 1e9;
    size_t len = 64u << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int said = 0;
    for (;;) {
        for (size_t i = 0; i < len; i += 4096) p[i] = 1;
        madvise(p, len, MADV_DONTNEED);
        if (!said) {
            printf("ready\n");
            fflush(stdout);
            said = 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > limit) break;
    }
    return 0;
}
