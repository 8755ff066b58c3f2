/* Grows the heap with sbrk in 32 steps of 64 KiB, writing every new page and pausing 25 ms
 * between steps (so the recorder's snapshots see it grow), then prints the heap's first
 * address and its final size. Used by tests/test_record.py: one [heap] mapping, not 32. */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(void) {
    char *start = sbrk(0);
    for (int step = 0; step < 32; step++) {
        char *p = sbrk(64 << 10);
        if (p == (void *)-1) return 1;
        for (long off = 0; off < (64 << 10); off += 4096) p[off] = (char)step;
        struct timespec ts = {0, 25 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    printf("%lx %ld\n", (unsigned long)start, (long)((char *)sbrk(0) - start));
    return 0;
}
