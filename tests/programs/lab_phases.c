/* A target for the lab's tiering test (tests/test_lab.py): prefers node PREF for its
 * allocations (set_mempolicy MPOL_PREFERRED), maps two regions A and B of N pages each, then
 * runs two phases of R rounds: each round drops the phase's region (MADV_DONTNEED), writes
 * one byte to each of its pages again (a page fault per page: the sample of page-fault
 * telemetry) and sleeps S milliseconds. Phase 1 works on A, phase 2 on B; A keeps its pages
 * in phase 2 but is no longer touched.
 *   lab_phases N R S PREF  (defaults 2048 8 100 1) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void nap(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2048;
    long rounds = argc > 2 ? atol(argv[2]) : 8;
    long ms = argc > 3 ? atol(argv[3]) : 100;
    long pref = argc > 4 ? atol(argv[4]) : 1;
    long page = sysconf(_SC_PAGESIZE);
    unsigned long mask = 1UL << pref;
    if (syscall(SYS_set_mempolicy, 1 /* MPOL_PREFERRED */, &mask, 64) != 0) perror("set_mempolicy");
    size_t len = (size_t)n * (size_t)page;
    char *r[2];
    for (int i = 0; i < 2; i++) {
        r[i] = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r[i] == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
    }
    printf("A %lx B %lx pages %ld\n", (unsigned long)r[0], (unsigned long)r[1], n);
    fflush(stdout);
    for (int phase = 0; phase < 2; phase++) {
        for (long k = 0; k < rounds; k++) {
            madvise(r[phase], len, MADV_DONTNEED);
            for (long i = 0; i < n; i++) r[phase][i * page] = (char)(k + 1);
            nap(ms);
        }
    }
    return 0;
}
