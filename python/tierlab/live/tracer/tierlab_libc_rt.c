/* tierlab's libc memory functions for traced programs: linked into a program built by
 * `tierlab trace --cc` beside tierlab_trace_rt.c. libc is not compiled with the
 * instrumentation, so what its memory functions read and write would be invisible; these
 * definitions take their place in the program (and in every library it loads that calls
 * them through the PLT: libstdc++, libgfortran, ...), record the bytes each call reads and
 * writes through the trace runtime's range callbacks (__tsan_read_range/__tsan_write_range:
 * one access per 8 bytes, the last one shorter), then do the work with libc's own function.
 *
 * What a call is recorded as (the bytes its definition must touch, independent of how libc's
 * vectorised code reads ahead):
 *   memcpy, mempcpy, memmove (d, s, n)   n bytes of s read, n bytes of d written
 *   memset (d, c, n)                     n bytes of d written
 *   memcmp, bcmp (a, b, n)               both read up to and including the first difference
 *   memchr (s, c, n)                     read up to and including the match (n when none)
 *   strlen (s), strnlen (s, n)           the string and its terminator (at most n) read
 *   strcpy, stpcpy (d, s)                strlen(s)+1 read, as many written
 *   strncpy (d, s, n)                    min(strlen(s)+1, n) read, n written (zero padding)
 *   strcat (d, s)                        d's string and terminator read, s's read, s's written at d's end
 *   strncat (d, s, n)                    the same, at most n bytes of s, then a terminator
 *   strcmp, strncmp (a, b[, n])          both read up to and including the first difference or terminator
 *   strchr (s, c), strrchr (s, c)        read up to the match (strchr) or the whole string (strrchr)
 * clang's instrumentation calls __tsan_memcpy/__tsan_memmove/__tsan_memset for the copies it
 * would otherwise emit as llvm.memcpy: defined here the same way. The _FORTIFY_SOURCE
 * variants (__memcpy_chk, ...) are not interposed: `tierlab trace --cc` compiles with
 * -U_FORTIFY_SOURCE.
 *
 * Written for tierlab (MIT licence). Build: cc -O2 -fPIC -fno-builtin
 *   -fno-tree-loop-distribute-patterns -c tierlab_libc_rt.c
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

void __tsan_read_range(void *a, unsigned long size);
void __tsan_write_range(void *a, unsigned long size);
int tierlab_trace_active(void);
extern void *__memcpy_chk(void *, const void *, size_t, size_t);
extern void *__memmove_chk(void *, const void *, size_t, size_t);
extern void *__memset_chk(void *, int, size_t, size_t);

#define EXPORT __attribute__((visibility("default")))
static inline int on(void) { return tierlab_trace_active(); }
static inline void rd(const void *a, size_t n) {
    if (n) __tsan_read_range((void *)a, n);
}
static inline void wr(void *a, size_t n) {
    if (n) __tsan_write_range(a, n);
}

/* Plain loops for the lengths and extents (not calls: these functions are the ones being
 * defined). */
static size_t len_of(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}
static size_t nlen_of(const char *s, size_t max) {
    size_t n = 0;
    while (n < max && s[n]) n++;
    return n;
}

/* -- copies ------------------------------------------------------------------------------- */
EXPORT void *memcpy(void *d, const void *s, size_t n) {
    if (on()) {
        rd(s, n);
        wr(d, n);
    }
    return __memcpy_chk(d, s, n, n);
}
EXPORT void *mempcpy(void *d, const void *s, size_t n) {
    if (on()) {
        rd(s, n);
        wr(d, n);
    }
    return (char *)__memcpy_chk(d, s, n, n) + n;
}
EXPORT void *memmove(void *d, const void *s, size_t n) {
    if (on()) {
        rd(s, n);
        wr(d, n);
    }
    return __memmove_chk(d, s, n, n);
}
EXPORT void *memset(void *d, int c, size_t n) {
    if (on()) wr(d, n);
    return __memset_chk(d, c, n, n);
}
EXPORT void *__tsan_memcpy(void *d, const void *s, size_t n) { return memcpy(d, s, n); }
EXPORT void *__tsan_memmove(void *d, const void *s, size_t n) { return memmove(d, s, n); }
EXPORT void *__tsan_memset(void *d, int c, size_t n) { return memset(d, c, n); }

/* -- comparisons and searches ------------------------------------------------------------ */
static size_t cmp_extent(const unsigned char *a, const unsigned char *b, size_t n) {
    size_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i < n ? i + 1 : n;
}
EXPORT int memcmp(const void *a, const void *b, size_t n) {
    size_t e = cmp_extent(a, b, n);
    if (on()) {
        rd(a, e);
        rd(b, e);
    }
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < e; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}
EXPORT int bcmp(const void *a, const void *b, size_t n) { return memcmp(a, b, n); }

EXPORT void *memchr(const void *s, int c, size_t n) {
    const unsigned char *p = s;
    size_t i = 0;
    while (i < n && p[i] != (unsigned char)c) i++;
    if (on()) rd(s, i < n ? i + 1 : n);
    return i < n ? (void *)(p + i) : NULL;
}

EXPORT size_t strlen(const char *s) {
    size_t n = len_of(s);
    if (on()) rd(s, n + 1);
    return n;
}
EXPORT size_t strnlen(const char *s, size_t max) {
    size_t n = nlen_of(s, max);
    if (on()) rd(s, n < max ? n + 1 : max);
    return n;
}

static size_t str_cmp_extent(const unsigned char *a, const unsigned char *b, size_t max) {
    size_t i = 0;
    while (i < max && a[i] == b[i] && a[i]) i++;
    return i < max ? i + 1 : max;
}
EXPORT int strcmp(const char *a, const char *b) {
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t e = str_cmp_extent(x, y, (size_t)-1);
    if (on()) {
        rd(a, e);
        rd(b, e);
    }
    return x[e - 1] == y[e - 1] ? 0 : x[e - 1] < y[e - 1] ? -1 : 1;
}
EXPORT int strncmp(const char *a, const char *b, size_t n) {
    if (n == 0) return 0;
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    size_t e = str_cmp_extent(x, y, n);
    if (on()) {
        rd(a, e);
        rd(b, e);
    }
    return x[e - 1] == y[e - 1] ? 0 : x[e - 1] < y[e - 1] ? -1 : 1;
}

EXPORT char *strchr(const char *s, int c) {
    size_t i = 0;
    while (s[i] && s[i] != (char)c) i++;
    if (on()) rd(s, i + 1);
    return s[i] == (char)c ? (char *)(s + i) : NULL;
}
EXPORT char *strrchr(const char *s, int c) {
    size_t n = len_of(s);
    if (on()) rd(s, n + 1);
    for (size_t i = n + 1; i-- > 0;)
        if (s[i] == (char)c) return (char *)(s + i);
    return NULL;
}

/* -- string copies ------------------------------------------------------------------------ */
EXPORT char *strcpy(char *d, const char *s) {
    size_t n = len_of(s) + 1;
    if (on()) {
        rd(s, n);
        wr(d, n);
    }
    __memmove_chk(d, s, n, n);
    return d;
}
EXPORT char *stpcpy(char *d, const char *s) {
    size_t n = len_of(s) + 1;
    if (on()) {
        rd(s, n);
        wr(d, n);
    }
    __memmove_chk(d, s, n, n);
    return d + n - 1;
}
EXPORT char *strncpy(char *d, const char *s, size_t n) {
    size_t k = nlen_of(s, n);
    size_t r = k < n ? k + 1 : n;
    if (on()) {
        rd(s, r);
        wr(d, n);
    }
    __memmove_chk(d, s, k, k);
    if (k < n) __memset_chk(d + k, 0, n - k, n - k);
    return d;
}
EXPORT char *strcat(char *d, const char *s) {
    size_t dl = len_of(d), sl = len_of(s) + 1;
    if (on()) {
        rd(d, dl + 1);
        rd(s, sl);
        wr(d + dl, sl);
    }
    __memmove_chk(d + dl, s, sl, sl);
    return d;
}
EXPORT char *strncat(char *d, const char *s, size_t n) {
    size_t dl = len_of(d), sl = nlen_of(s, n);
    if (on()) {
        rd(d, dl + 1);
        rd(s, sl < n ? sl + 1 : n);
        wr(d + dl, sl + 1);
    }
    __memmove_chk(d + dl, s, sl, sl);
    d[dl + sl] = 0;
    return d;
}
