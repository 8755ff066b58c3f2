/* Maps N pages, writes each, unmaps them, waits 150 ms (the recorder sees the unmap) and
 * exits: a program whose mapping is gone before the recording ends. Prints the mapping's
 * address and N. Used by tests/test_record.py: `place plan` plans those pages from the
 * mapping history. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1024;
    char *p = mmap(NULL, (size_t)n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (long i = 0; i < n; i++) p[i * 4096] = (char)i;
    printf("%lx %ld\n", (unsigned long)p, n);
    fflush(stdout);
    munmap(p, (size_t)n * 4096);
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return 0;
}
