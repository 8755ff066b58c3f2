/* Maps an 8 MiB buffer A, touches it, unmaps it; sleeps (so a maps snapshot sees A gone);
 * maps a 12 MiB buffer B, touches it, unmaps half of it; prints "A addr len" and "B addr len".
 * Used by tests/test_record.py: the mapping history must show both maps and unmaps. */
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>

static void touch(char *p, size_t len) {
    for (size_t i = 0; i < len; i += 4096) p[i] = 1;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void) {
    size_t a_len = 8u << 20, b_len = 12u << 20;
    char *a = mmap(NULL, a_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) return 1;
    touch(a, a_len);
    pause_ms(60);
    munmap(a, a_len);
    pause_ms(60);
    char *b = mmap(NULL, b_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return 1;
    touch(b, b_len);
    pause_ms(60);
    munmap(b + b_len / 2, b_len / 2);
    pause_ms(60);
    printf("A %lx %zu\nB %lx %zu\n", (unsigned long)a, a_len, (unsigned long)b, b_len);
    return 0;
}
