/* Sparse matrix-vector products y = A x with A in CSR form, random column indices (a fixed
 * LCG), OpenMP over rows: every thread reads all of x. Usage: omp_spmv ROWS NNZ_PER_ROW ITERS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    int nnz = argc > 2 ? atoi(argv[2]) : 8;
    int iters = argc > 3 ? atoi(argv[3]) : 2;
    long *ptr = malloc((n + 1) * sizeof *ptr);
    int *col = malloc(n * nnz * sizeof *col);
    double *val = malloc(n * nnz * sizeof *val), *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint64_t s = 12345;
    for (long i = 0; i <= n; i++) ptr[i] = i * nnz;
    for (long k = 0; k < n * nnz; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        col[k] = (int)((s >> 33) % (uint64_t)n);
        val[k] = 1.0 / (double)(1 + k % 7);
    }
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) x[i] = 1.0;
    for (int it = 0; it < iters; it++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) {
            double sum = 0;
            for (long k = ptr[i]; k < ptr[i + 1]; k++) sum += val[k] * x[col[k]];
            y[i] = sum;
        }
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) x[i] = y[i] * 0.5;
    }
    printf("%.6f\n", x[n / 2]);
    return 0;
}
