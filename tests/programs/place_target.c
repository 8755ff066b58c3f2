/* A target for `tierlab place` (tests/test_place.py): maps N pages (argv[1], default 2048 =
 * 8 MiB) of anonymous memory, prints "ready ADDR N", then obeys one command per stdin line and
 * answers each with one line:
 *   touch T   write one byte to each of the first T pages      -> "touched T"
 *   unmap     unmap the second half of the mapping             -> "unmapped"
 *   remap     map /dev/zero over the whole range (MAP_FIXED)   -> "remapped"
 * and exits at end of input. Pages it never touches stay not present. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2048;
    size_t len = (size_t)n * 4096;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    printf("ready %lx %ld\n", (unsigned long)p, n);
    fflush(stdout);
    char line[128];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "touch", 5) == 0) {
            long t = atol(line + 5);
            if (t > n) t = n;
            for (long i = 0; i < t; i++) p[i * 4096] = (char)(i + 1);
            printf("touched %ld\n", t);
        } else if (strncmp(line, "unmap", 5) == 0) {
            munmap(p + len / 2, len / 2);
            printf("unmapped\n");
        } else if (strncmp(line, "remap", 5) == 0) {
            int fd = open("/dev/zero", O_RDWR);
            void *q = fd < 0 ? MAP_FAILED
                             : mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0);
            if (fd >= 0) close(fd);
            printf(q == MAP_FAILED ? "remap failed\n" : "remapped\n");
        } else {
            printf("unknown\n");
        }
        fflush(stdout);
    }
    return 0;
}
