/* Phases of deliberately unequal work separated by OpenMP barriers, each ending in a short
 * critical section that every thread enters (built with clang -fopenmp: LLVM libomp's
 * __kmpc_barrier, __kmpc_critical, __kmpc_fork_call). In phase p, thread p % n does HEAVY
 * passes over its row, the others LIGHT passes; then each adds its row's first element to a
 * shared total under the critical section. Usage: omp_critical_phases PHASES N */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define HEAVY 16
#define LIGHT 2

int main(int argc, char **argv) {
    int phases = argc > 1 ? atoi(argv[1]) : 4;
    long n = argc > 2 ? atol(argv[2]) : 4096;
    int threads = omp_get_max_threads();
    double *a = calloc((size_t)threads * (size_t)n, sizeof *a);
    double total = 0;
#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        double *row = a + (size_t)t * (size_t)n;
        for (int p = 0; p < phases; p++) {
            int reps = t == p % nt ? HEAVY : LIGHT;
            for (int r = 0; r < reps; r++)
                for (long i = 0; i < n; i++) row[i] += (double)i * 0.5 + r;
#pragma omp critical
            total += row[0];
#pragma omp barrier
        }
    }
    printf("%g\n", total);
    free(a);
    return 0;
}
