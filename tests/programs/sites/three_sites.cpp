// Three allocation sites of known sizes and access counts (tests/test_alloc_sites.py, -O1): malloc
// 32768 B (4096 stores, 3 x 4096 loads), calloc 4000 B (500 stores, 1 load, 2000 B touched), new[]
// 4096 B (512 stores, 1 load); a forked child's malloc 8000 B (1000 stores, 2 x 1000 loads).
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>
static int child(void); // the child's work, after main (the sites stay at lines 12-14)
int main(int argc, char **argv) {
    (void)argv;
    int n = 4096;
    long *a = (long *)malloc(n * sizeof(long));
    int *b = (int *)calloc(1000, sizeof(int));
    double *c = new double[512];
    for (int i = 0; i < n; i++) a[i] = i;
    long sum = 0;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < n; i++) sum += a[i];
    for (int i = 0; i < 500; i++) b[i] = i;
    for (int i = 0; i < 512; i++) c[i] = 1.0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(child()); // no atexit handler: the runtimes write before leaving
    int status = 0;
    waitpid(pid, &status, 0);
    printf("%ld %d %.1f %d\n", sum, b[argc], c[argc], WEXITSTATUS(status));
    free(a);
    free(b);
    delete[] c;
    return 0;
}

static int child(void) {
    long *d = (long *)malloc(1000 * sizeof(long));
    for (int i = 0; i < 1000; i++) d[i] = i;
    long sum = 0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 1000; i++) sum += d[i];
    free(d);
    return (int)(sum % 101);
}
