/* A random-access (GUPS-style) kernel: UPDATES read-modify-writes Table[r & (SIZE - 1)] ^= r
 * of a table of 2^LOG2 u64 words, r from a 64-bit LCG, OpenMP over the updates (each thread
 * its own stream). Usage: bench_gups LOG2 UPDATES */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int log2n = argc > 1 ? atoi(argv[1]) : 20;
    long updates = argc > 2 ? atol(argv[2]) : 1000000;
    uint64_t size = 1ull << log2n, mask = size - 1;
    uint64_t *table = malloc(size * sizeof *table);
#pragma omp parallel for schedule(static)
    for (uint64_t i = 0; i < size; i++) table[i] = i;
#pragma omp parallel
    {
        uint64_t r = 0x9e3779b97f4a7c15ull;
#ifdef _OPENMP
        extern int omp_get_thread_num(void), omp_get_num_threads(void);
        r += (uint64_t)omp_get_thread_num() * 0x632be59bd9b4e019ull;
        long mine = updates / omp_get_num_threads();
#else
        long mine = updates;
#endif
        for (long k = 0; k < mine; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            table[(r >> 17) & mask] ^= r;
        }
    }
    uint64_t sum = 0;
    for (uint64_t i = 0; i < size; i += 4096) sum += table[i];
    printf("%llu\n", (unsigned long long)sum);
    free(table);
    return 0;
}
