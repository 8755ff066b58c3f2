// thp_touch MIB [MS]: map MIB MiB aligned to 2 MiB, ask for transparent huge pages
// (madvise MADV_HUGEPAGE), write one byte per 4 KiB page, print the address, the size and the
// AnonHugePages the kernel gave it, then stay alive MS milliseconds (default 400) so a recorder
// can read /proc/PID/smaps, and exit.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    long ms = argc > 2 ? strtol(argv[2], NULL, 10) : 400;
    size_t size = mib << 20, align = 2u << 20;
    char *raw = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return 1;
    char *p = (char *)(((unsigned long)raw + align - 1) & ~(unsigned long)(align - 1));
    madvise(p, size, MADV_HUGEPAGE);
    for (size_t off = 0; off < size; off += 4096) p[off] = 1;
    long huge = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a <= (unsigned long)p && (unsigned long)p < b;
        } else if (in && strncmp(line, "AnonHugePages:", 14) == 0) {
            huge += strtol(line + 14, NULL, 10);
        }
    }
    if (f) fclose(f);
    printf("%p %zu %ld\n", (void *)p, size, huge << 10);
    fflush(stdout);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 0;
}
