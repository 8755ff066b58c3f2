/* A small OpenMP program for `tierlab trace --cc` (README tour):
 *   tierlab trace --cc examples/prog.c --cflags "-O2 -fopenmp" -o rec -- 1000000 4
 * A STREAM-like triad a = b + 3c over N doubles, ITER times, then a strided pass that touches
 * one double per 4 KiB page of a: three arrays, a hot phase and a sparse one. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    int iter = argc > 2 ? atoi(argv[2]) : 4;
    if (n < 1 || iter < 1) {
        fprintf(stderr, "usage: %s [N >= 1] [ITER >= 1]\n", argv[0]);
        return 2;
    }
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
#pragma omp parallel for
    for (long i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = (double)i;
        c[i] = 1.0;
    }
    for (int k = 0; k < iter; k++) {
#pragma omp parallel for
        for (long i = 0; i < n; i++)
            a[i] = b[i] + 3.0 * c[i];
    }
    double sum = 0.0;
    for (long i = 0; i < n; i += 512) /* one double per 4 KiB */
        sum += a[i];
    printf("%.1f\n", sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
