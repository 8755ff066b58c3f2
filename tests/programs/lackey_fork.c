/* For tierlab trace --follow-children: the parent writes 100 elements of an array, forks a
 * child that writes 200 and execs this program again ("exec"), which writes 300. Each prints
 * "ROLE PID ADDRESS N" (its array's address) on stdout. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static long a[512];

static void fill(const char *role, int n) {
    for (int i = 0; i < n; i++) a[i] = i;
    printf("%s %d %p %d\n", role, (int)getpid(), (void *)a, n);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc > 1) {
        fill("exec", 300);
        return 0;
    }
    fill("parent", 100);
    pid_t pid = fork();
    if (pid == 0) {
        fill("child", 200);
        execl(argv[0], argv[0], "exec", (char *)0);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WEXITSTATUS(status);
}
