// A GUPS-style kernel (random read-modify-writes of a heap table) with the read-modify-writes
// a compiler may instrument as a store alone: x ^= y on the heap, x++ and an atomic on
// globals. tests/test_alloc_sites.py traces it built with gcc and with clang. `updates` is
// volatile: at -O1 clang keeps a plain counter in a register for the whole loop (one load
// and one store) where gcc loads and stores it at every step; that is the compilers
// changing the program, not the trace missing accesses.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

volatile uint64_t updates;
uint64_t atomic_hits;

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 4096;
    long steps = argc > 2 ? atol(argv[2]) : 20000;
    uint64_t *table = malloc(n * sizeof *table);
    for (long i = 0; i < n; i++) table[i] = (uint64_t)i;
    uint64_t ran = 1;
    for (long i = 0; i < steps; i++) {
        ran = (ran << 1) ^ ((int64_t)ran < 0 ? 7 : 0);
        table[ran & (uint64_t)(n - 1)] ^= ran;
        updates++;
        __atomic_fetch_add(&atomic_hits, 1, __ATOMIC_RELAXED);
    }
    uint64_t check = 0;
    for (long i = 0; i < n; i++) check += table[i];
    printf("%llu %llu %llu\n", (unsigned long long)check, (unsigned long long)updates,
           (unsigned long long)atomic_hits);
    free(table);
    return 0;
}
