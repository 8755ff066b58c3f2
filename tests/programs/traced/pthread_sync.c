/* pthread synchronisation for the tracer: the main thread prepares a table, then releases
 * the workers through a condition variable; the workers run phases of unequal work between
 * pthread barriers, and a last phase whose work is all inside one mutex (so it runs one
 * thread at a time). Usage: pthread_sync THREADS N */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define PHASES 3
#define HEAVY 12
#define LIGHT 2

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t bar;
static int go, threads;
static long n;
static double *table, *rows, total;

static void *worker(void *arg) {
    long t = (long)arg;
    double *row = rows + t * n;
    pthread_mutex_lock(&mu);
    while (!go) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    for (int p = 0; p < PHASES; p++) {
        int reps = t == p % threads ? HEAVY : LIGHT;
        for (int r = 0; r < reps; r++)
            for (long i = 0; i < n; i++) row[i] += table[i] + r;
        pthread_barrier_wait(&bar);
    }
    pthread_mutex_lock(&mu);
    for (int r = 0; r < LIGHT * (int)(t + 1); r++)
        for (long i = 0; i < n; i++) total += row[i] * 0.5;
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(int argc, char **argv) {
    threads = argc > 1 ? atoi(argv[1]) : 3;
    n = argc > 2 ? atol(argv[2]) : 2048;
    table = malloc((size_t)n * sizeof *table);
    rows = calloc((size_t)threads * (size_t)n, sizeof *rows);
    pthread_t *th = malloc((size_t)threads * sizeof *th);
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int r = 0; r < HEAVY; r++)
        for (long i = 0; i < n; i++) table[i] = (double)(i % 97) * 0.25 + r;
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    printf("%g\n", total);
    return 0;
}
