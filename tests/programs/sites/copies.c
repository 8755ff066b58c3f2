// libc's memory functions in a trace (tests/test_alloc_sites.py): a memset of N bytes, a
// memcpy of N bytes and a copy loop the compiler may turn into a memcpy call. N comes from
// the command line and the byte from argc, so the compiler cannot fold the copies away.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 3000;
    char *src = malloc(n);
    char *dst = malloc(n);
    char *buf = malloc(n);
    char *dst2 = malloc(n);
    memset(src, argc, n);
    memcpy(dst, src, n);
    for (size_t i = 0; i < n; i++) dst2[i] = buf[i];
    printf("%d %d\n", dst[n - 1], dst2[0]);
    free(src);
    free(dst);
    free(buf);
    free(dst2);
    return 0;
}
