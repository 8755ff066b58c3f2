/* A library under the tracer: LZ4 (lz4_mini/lz4.c, a small codec of the LZ4 block format;
 * the lz4 project's own lz4.c builds with it too) compresses and decompresses BLOCKS blocks
 * of generated text in parallel (OpenMP), then checks the round trip. Build with lz4.c and
 * -I to lz4.h. Usage: lz4_omp BLOCKS BLOCK_BYTES */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lz4.h"

int main(int argc, char **argv) {
    int blocks = argc > 1 ? atoi(argv[1]) : 8;
    int size = argc > 2 ? atoi(argv[2]) : 65536;
    int bound = LZ4_compressBound(size);
    char *src = malloc((size_t)blocks * size), *dst = malloc((size_t)blocks * bound), *back = malloc((size_t)blocks * size);
    int *clen = malloc(blocks * sizeof *clen);
    static const char *words[] = {"memory ", "tier ", "page ", "fault ", "access ", "trace ", "replay ", "hot "};
    unsigned s = 7;
    for (long i = 0; i < (long)blocks * size;) {
        s = s * 1103515245u + 12345u;
        const char *w = words[(s >> 16) % 8];
        for (const char *c = w; *c && i < (long)blocks * size; c++) src[i++] = *c;
    }
    int bad = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : bad)
    for (int b = 0; b < blocks; b++) {
        clen[b] = LZ4_compress_default(src + (long)b * size, dst + (long)b * bound, size, bound);
        int n = LZ4_decompress_safe(dst + (long)b * bound, back + (long)b * size, clen[b], size);
        bad += n != size || memcmp(src + (long)b * size, back + (long)b * size, size) != 0;
    }
    long total = 0;
    for (int b = 0; b < blocks; b++) total += clen[b];
    printf("%ld %d\n", total, bad);
    return bad != 0;
}
