/* 2-D 5-point Jacobi sweeps on an N x N grid of doubles (two grids swapped), OpenMP over rows.
 * Usage: bench_stencil N ITERATIONS */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 256;
    int iters = argc > 2 ? atoi(argv[2]) : 4;
    double *u = malloc(n * n * sizeof *u), *v = malloc(n * n * sizeof *v);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) u[i * n + j] = v[i * n + j] = (i == 0 || j == 0) ? 1.0 : 0.0;
    for (int k = 0; k < iters; k++) {
#pragma omp parallel for schedule(static)
        for (long i = 1; i < n - 1; i++)
            for (long j = 1; j < n - 1; j++)
                v[i * n + j] = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] + u[i * n + j + 1]);
        double *t = u;
        u = v;
        v = t;
    }
    printf("%.6f\n", u[(n / 2) * n + n / 2]);
    free(u);
    free(v);
    return 0;
}
