/* See lz4.h. */
#include <stdint.h>
#include <string.h>
#include "lz4.h"

#define MINMATCH 4
#define LASTLITERALS 5
#define MFLIMIT 12
#define HASH_LOG 12

int LZ4_compressBound(int n) { return n < 0 || n > 0x7E000000 ? 0 : n + n / 255 + 16; }

static uint32_t read32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static unsigned hash4(uint32_t v) { return (v * 2654435761u) >> (32 - HASH_LOG); }

/* A length of 15 or more continues in bytes of 255 and a final smaller one. */
static uint8_t *put_length(uint8_t *op, int len) {
    for (len -= 15; len >= 255; len -= 255) *op++ = 255;
    *op++ = (uint8_t)len;
    return op;
}

static uint8_t *put_sequence(uint8_t *op, const uint8_t *lit, int nlit, int off, int mlen) {
    uint8_t *token = op++;
    *token = (uint8_t)((nlit >= 15 ? 15 : nlit) << 4);
    if (nlit >= 15) op = put_length(op, nlit);
    memcpy(op, lit, (size_t)nlit);
    op += nlit;
    if (mlen < 0) return op; /* the last literals: no match */
    *op++ = (uint8_t)off;
    *op++ = (uint8_t)(off >> 8);
    mlen -= MINMATCH;
    *token |= (uint8_t)(mlen >= 15 ? 15 : mlen);
    if (mlen >= 15) op = put_length(op, mlen);
    return op;
}

int LZ4_compress_default(const char *source, char *dest, int n, int cap) {
    const uint8_t *src = (const uint8_t *)source, *ip = src, *anchor = src;
    const uint8_t *end = src + n, *mflimit = end - MFLIMIT, *mlimit = end - LASTLITERALS;
    uint8_t *op = (uint8_t *)dest;
    int32_t table[1 << HASH_LOG];
    if (cap < LZ4_compressBound(n)) return 0;
    for (int i = 0; i < (1 << HASH_LOG); i++) table[i] = -1;
    while (n >= MFLIMIT && ip < mflimit) {
        unsigned h = hash4(read32(ip));
        int32_t cand = table[h];
        table[h] = (int32_t)(ip - src);
        if (cand < 0 || ip - (src + cand) > 65535 || read32(src + cand) != read32(ip)) {
            ip++;
            continue;
        }
        const uint8_t *ref = src + cand, *m = ip + MINMATCH, *r = ref + MINMATCH;
        while (m < mlimit && *m == *r) m++, r++;
        op = put_sequence(op, anchor, (int)(ip - anchor), (int)(ip - ref), (int)(m - ip));
        ip = anchor = m;
    }
    op = put_sequence(op, anchor, (int)(end - anchor), 0, -1);
    return (int)(op - (uint8_t *)dest);
}

static int get_length(const uint8_t **ip, const uint8_t *iend, int len) {
    if (len != 15) return len;
    for (;;) {
        if (*ip >= iend) return -1;
        uint8_t b = *(*ip)++;
        len += b;
        if (b != 255) return len;
    }
}

int LZ4_decompress_safe(const char *source, char *dest, int n, int cap) {
    const uint8_t *ip = (const uint8_t *)source, *iend = ip + n;
    uint8_t *op = (uint8_t *)dest, *oend = op + cap;
    while (ip < iend) {
        uint8_t token = *ip++;
        int nlit = get_length(&ip, iend, token >> 4);
        if (nlit < 0 || nlit > iend - ip || nlit > oend - op) return -1;
        memcpy(op, ip, (size_t)nlit);
        op += nlit;
        ip += nlit;
        if (ip == iend) break; /* the last sequence has only literals */
        if (iend - ip < 2) return -1;
        int off = ip[0] | ip[1] << 8;
        ip += 2;
        int mlen = get_length(&ip, iend, token & 15);
        if (mlen < 0 || off == 0 || off > op - (uint8_t *)dest) return -1;
        mlen += MINMATCH;
        if (mlen > oend - op) return -1;
        for (const uint8_t *ref = op - off; mlen--;) *op++ = *ref++; /* overlaps allowed */
    }
    return (int)(op - (uint8_t *)dest);
}
