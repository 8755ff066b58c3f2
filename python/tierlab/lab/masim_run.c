/* masim_run: runs a masim configuration file on Linux (the lab's workload for comparing the
 * kernel's DAMON with tierlab's; the grammar and semantics of reference/masim-format.md):
 * regions allocated with mmap and faulted in on first touch, then the phases in order, each
 * until its time is up: choose a pattern with probability weight / sum, perform 131072
 * accesses on it (sequential: the offset advances by the stride before each access and wraps
 * to 0 at the region's end, and persists across selections; random: offset = random % size),
 * writes for wo/rw, reads for ro. Prints "ready PID" when the regions are mapped, waits for a
 * line on stdin (so a monitor can attach first), then runs; per phase "<name>: <ms> msecs".
 * With NODE, every page of the regions is written once before "ready" with the allocations
 * preferring NODE (set_mempolicy MPOL_PREFERRED), and the policy is reset to the default
 * afterwards, so the pages start on NODE and nothing pins them there (the tiering
 * comparison: NUMA balancing leaves pages of a task with an explicit policy alone); each
 * region is followed by a PROT_NONE page so that it stays a mapping of its own.
 *   masim_run CONFIG [NODE] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXR 64
#define MAXP 64
#define MAXA 64
#define PER_SELECTION 131072

struct region { char name[64]; size_t size; unsigned char *mem; size_t off; };
struct access { int region; int random; size_t stride; long weight; int mode; };
struct phase { char name[128]; long ms; int n; struct access a[MAXA]; };

static struct region R[MAXR];
static struct phase P[MAXP];
static int nr, np;

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = 0;
    return s;
}

static size_t size_of(const char *s) {
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024.0 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    case 'T': case 't': v *= 1024.0 * 1024 * 1024 * 1024; break;
    }
    return (size_t)v;
}

static int split(char *line, char **f, int max) {
    int n = 0;
    for (char *t = strtok(line, ","); t && n < max; t = strtok(NULL, ",")) f[n++] = trim(t);
    return n;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: masim_run CONFIG [NODE]\n"); return 2; }
    long node = argc > 2 ? atol(argv[2]) : -1;
    FILE *f = fopen(argv[1], "r");
    if (!f) { perror(argv[1]); return 2; }
    char line[1024];
    int para = 0, inpara = 0, lno = 0, pline = 0;
    while (fgets(line, sizeof line, f)) {
        lno++;
        if (line[0] == '#') continue;
        char *s = trim(line);
        if (!*s) { if (inpara) { para++; inpara = 0; } continue; }
        if (!inpara) { inpara = 1; pline = 0; if (para > 0) { if (np == MAXP) return 2; np++; } }
        char *fl[8];
        if (para == 0) {
            int n = split(s, fl, 8);
            if (n < 2 || nr == MAXR) { fprintf(stderr, "%s:%d: bad region\n", argv[1], lno); return 2; }
            snprintf(R[nr].name, sizeof R[nr].name, "%s", fl[0]);
            R[nr].size = size_of(fl[1]);
            nr++;
        } else {
            struct phase *ph = &P[np - 1];
            if (pline == 0) snprintf(ph->name, sizeof ph->name, "%s", s);
            else if (pline == 1) ph->ms = atol(s);
            else {
                int n = split(s, fl, 8);
                if (n < 4 || ph->n == MAXA) { fprintf(stderr, "%s:%d: bad access\n", argv[1], lno); return 2; }
                struct access *a = &ph->a[ph->n];
                a->region = -1;
                for (int i = 0; i < nr; i++) if (!strcmp(R[i].name, fl[0])) a->region = i;
                if (a->region < 0) { fprintf(stderr, "%s:%d: unknown region %s\n", argv[1], lno, fl[0]); return 2; }
                a->random = atoi(fl[1]);
                a->stride = size_of(fl[2]);
                a->weight = atol(fl[3]);
                a->mode = n > 4 && !strcmp(fl[4], "ro") ? 0 : 1;
                ph->n++;
            }
            pline++;
        }
    }
    fclose(f);
    if (node >= 0) {
        unsigned long mask = 1UL << node;
        if (syscall(SYS_set_mempolicy, 1 /* MPOL_PREFERRED */, &mask, 64) != 0) { perror("set_mempolicy"); return 1; }
    }
    long page = sysconf(_SC_PAGESIZE);
    for (int i = 0; i < nr; i++) {
        /* With NODE, a PROT_NONE page after each region keeps the regions in mappings of
         * their own (adjacent anonymous mappings merge), so numa_maps counts each. */
        size_t len = node >= 0 ? (R[i].size + 2 * (size_t)page - 1) / (size_t)page * (size_t)page : R[i].size;
        R[i].mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (R[i].mem == MAP_FAILED) { perror("mmap"); return 1; }
        if (node >= 0) {
            if (mprotect(R[i].mem + len - (size_t)page, (size_t)page, PROT_NONE) != 0) { perror("mprotect"); return 1; }
            for (size_t o = 0; o < R[i].size; o += (size_t)page) R[i].mem[o] = 1;
        }
        printf("region %s %lx %zu\n", R[i].name, (unsigned long)R[i].mem, R[i].size);
    }
    if (node >= 0 && syscall(SYS_set_mempolicy, 0 /* MPOL_DEFAULT */, NULL, 0) != 0) { perror("set_mempolicy"); return 1; }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin)) return 0;
    uint64_t rnd = 88172645463325252ULL;
    volatile unsigned char sink = 0;
    for (int p = 0; p < np; p++) {
        struct phase *ph = &P[p];
        long total = 0;
        for (int i = 0; i < ph->n; i++) total += ph->a[i].weight;
        double start = now_ms();
        while (now_ms() - start < ph->ms) {
            rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17;
            long pick = total > 0 ? (long)(rnd % (uint64_t)total) : 0;
            struct access *a = &ph->a[0];
            for (int i = 0; i < ph->n; i++) { if (pick < ph->a[i].weight) { a = &ph->a[i]; break; } pick -= ph->a[i].weight; }
            struct region *r = &R[a->region];
            for (int k = 0; k < PER_SELECTION; k++) {
                size_t off;
                if (a->random) { rnd ^= rnd << 13; rnd ^= rnd >> 7; rnd ^= rnd << 17; off = rnd % r->size; }
                else { r->off += a->stride; if (r->off >= r->size) r->off = 0; off = r->off; }
                if (a->mode) r->mem[off] = (unsigned char)k; else sink += r->mem[off];
            }
        }
        printf("%s: %.0f msecs\n", ph->name, now_ms() - start);
        fflush(stdout);
    }
    return 0;
}
