// A cold array allocated and touched first, then a hot one (docs/placement.md, site-based
// placement): first touch fills a small fast tier with the cold array; a site plan puts the
// hot one there from its first access.
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long cold_n = argc > 1 ? atol(argv[1]) : 32768;
    long hot_n = argc > 2 ? atol(argv[2]) : 4096;
    long rounds = argc > 3 ? atol(argv[3]) : 50;
    long *cold = malloc(cold_n * sizeof *cold);
    for (long i = 0; i < cold_n; i++) cold[i] = i;
    long *hot = malloc(hot_n * sizeof *hot);
    for (long i = 0; i < hot_n; i++) hot[i] = 0;
    for (long r = 0; r < rounds; r++)
        for (long i = 0; i < hot_n; i++) hot[i] += r;
    long sum = 0;
    for (long i = 0; i < cold_n; i++) sum += cold[i];
    printf("%ld %ld\n", sum, hot[hot_n - 1]);
    free(hot);
    free(cold);
    return 0;
}
