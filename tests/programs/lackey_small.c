/* A small single-threaded program for tierlab trace: sums an array it fills. */
#include <stdio.h>

static long a[512];

int main(void) {
    long s = 0;
    for (int i = 0; i < 512; i++) a[i] = i;
    for (int i = 0; i < 512; i++) s += a[i];
    printf("%ld\n", s);
    return 0;
}
