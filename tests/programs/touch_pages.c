/* Writes one byte to each of N pages of a fresh mapping, in order, then prints the mapping's
 * address and N. Used by tests/test_record.py: every page must appear in the samples. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1024;
    char *p = mmap(NULL, (size_t)n * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (long i = 0; i < n; i++) p[i * 4096] = (char)i;
    printf("%lx %ld\n", (unsigned long)p, n);
    return 0;
}
