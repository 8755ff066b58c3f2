/* A small in-memory key-value store under a YCSB-like load: an open-addressing hash index
 * of 8-byte slots (key -> value number) and a slab of fixed-size values allocated in
 * insertion order, then Zipfian gets (theta 0.99, YCSB's ZipfianGenerator over insertion
 * order: popular keys were loaded together) with a share of updates. The values are
 * zeroed by calloc (not traced: libc), so the trace's first touch of a value page is the
 * first request that reads it.
 * Usage: kv_zipf KEYS VALUE_BYTES REQUESTS UPDATE_PERCENT */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double next_unit(void) { return (next_u64() >> 11) * (1.0 / 9007199254740992.0); }

static uint64_t hash_key(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

int main(int argc, char **argv) {
    long keys = argc > 1 ? atol(argv[1]) : 65536;
    long vsize = argc > 2 ? atol(argv[2]) : 256;
    long requests = argc > 3 ? atol(argv[3]) : 100000;
    long upd = argc > 4 ? atol(argv[4]) : 5;
    long slots = 1;
    while (slots < 2 * keys) slots <<= 1;
    uint64_t *index = malloc(slots * sizeof *index); /* 0 = empty, else value number + 1 */
    uint64_t *slab = calloc((size_t)keys * vsize / 8, 8);
    long words = vsize / 8;
    for (long s = 0; s < slots; s++) index[s] = 0;
    for (long k = 0; k < keys; k++) { /* load: value k holds key k in its first word */
        uint64_t h = hash_key((uint64_t)k) & (slots - 1);
        while (index[h]) h = (h + 1) & (slots - 1);
        index[h] = (uint64_t)k + 1;
        slab[k * words] = (uint64_t)k;
    }
    /* YCSB ZipfianGenerator (Gray et al.), theta 0.99, over ranks 0..keys-1. */
    const double theta = 0.99;
    double zetan = 0, zeta2 = 1.0 + pow(0.5, theta);
    for (long i = 1; i <= keys; i++) zetan += 1.0 / pow((double)i, theta);
    double alpha = 1.0 / (1.0 - theta);
    double eta = (1.0 - pow(2.0 / keys, 1.0 - theta)) / (1.0 - zeta2 / zetan);
    uint64_t sum = 0;
    for (long r = 0; r < requests; r++) {
        double u = next_unit(), uz = u * zetan;
        long k = uz < 1.0 ? 0 : uz < zeta2 ? 1 : (long)(keys * pow(eta * u - eta + 1.0, alpha));
        if (k >= keys) k = keys - 1;
        uint64_t h = hash_key((uint64_t)k) & (slots - 1);
        while (index[h] && slab[(index[h] - 1) * words] != (uint64_t)k) h = (h + 1) & (slots - 1);
        uint64_t *v = slab + (index[h] - 1) * words;
        if ((long)(next_u64() % 100) < upd) {
            for (long w = 1; w < words; w += 16) v[w] = (uint64_t)r;
        } else {
            for (long w = 1; w < words; w += 16) sum += v[w];
        }
    }
    printf("%llu\n", (unsigned long long)sum);
    free(index);
    free(slab);
    return 0;
}
