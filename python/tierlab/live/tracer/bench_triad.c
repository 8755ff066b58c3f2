/* STREAM-like triad a = b + 3 c over three arrays, OpenMP static schedule.
 * Usage: omp_triad N ITERATIONS */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    int iters = argc > 2 ? atoi(argv[2]) : 3;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = (double)i;
        c[i] = 2.0 * (double)i;
    }
    for (int k = 0; k < iters; k++) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
    }
    printf("%.0f\n", a[n - 1]);
    free(a);
    free(b);
    free(c);
    return 0;
}
