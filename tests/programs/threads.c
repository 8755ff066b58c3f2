/* T threads, each writing its own pages of a shared 16 MiB buffer; prints each thread's id.
 * Used by tests/test_record.py: every thread must appear in the samples. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGES_PER_THREAD 256
static char *buf;
static pid_t tids[64];

static void *work(void *arg) {
    long k = (long)arg;
    tids[k] = (pid_t)syscall(SYS_gettid);
    char *mine = buf + (size_t)k * PAGES_PER_THREAD * 4096;
    for (long i = 0; i < PAGES_PER_THREAD; i++) mine[i * 4096] = 1;
    return NULL;
}

int main(int argc, char **argv) {
    long t = argc > 1 ? atol(argv[1]) : 4;
    if (t < 1 || t > 64) return 2;
    buf = mmap(NULL, (size_t)t * PAGES_PER_THREAD * 4096, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return 1;
    pthread_t th[64];
    for (long k = 0; k < t; k++) pthread_create(&th[k], NULL, work, (void *)k);
    for (long k = 0; k < t; k++) pthread_join(th[k], NULL);
    for (long k = 0; k < t; k++) printf("%d\n", (int)tids[k]);
    return 0;
}
