/* LD_PRELOAD shim for tests/test_tier.py: interposes libc's syscall(), and for every
 * move_pages call checks each address against /proc/PID/maps read at that moment, then
 * forwards the call. One line per call to $TIER_SHIM_LOG:
 *   <move|query> <pid> <count> <outside> <addr-hex>...
 * where <outside> counts addresses lying outside every mapping of the target. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef long (*syscall_fn)(long, ...);

static int inside(unsigned long a, unsigned long (*r)[2], int n) {
    for (int i = 0; i < n; i++)
        if (r[i][0] <= a && a + 4096 <= r[i][1])
            return 1;
    return 0;
}

static void log_call(long pid, unsigned long count, const unsigned long *pages, const void *nodes) {
    const char *path = getenv("TIER_SHIM_LOG");
    if (!path)
        return;
    char maps[64];
    snprintf(maps, sizeof maps, "/proc/%ld/maps", pid ? pid : (long)getpid());
    static unsigned long ranges[65536][2];
    int n = 0;
    FILE *m = fopen(maps, "r");
    if (m) {
        char line[4096];
        while (n < 65536 && fgets(line, sizeof line, m))
            if (sscanf(line, "%lx-%lx", &ranges[n][0], &ranges[n][1]) == 2)
                n++;
        fclose(m);
    }
    unsigned long outside = 0;
    for (unsigned long i = 0; i < count; i++)
        outside += !inside(pages[i], ranges, n);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "%s %ld %lu %lu", nodes ? "move" : "query", pid, count, outside);
    for (unsigned long i = 0; i < count; i++)
        fprintf(f, " %lx", pages[i]);
    fputc('\n', f);
    fclose(f);
}

long syscall(long nr, ...) {
    static syscall_fn real;
    if (!real)
        real = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_move_pages)
        log_call(a[0], (unsigned long)a[1], (const unsigned long *)a[2], (const void *)a[3]);
    return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
