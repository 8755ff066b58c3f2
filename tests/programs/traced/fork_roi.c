/* Processes, windows and a region of interest for `tierlab trace --cc`. The mode is the
 * number of arguments (no argument is read: the only instrumented accesses are the stores
 * to A and B):
 *   no argument: PARENT stores; fork: the child makes CHILD stores and execs this program with
 *     one argument (EXEC stores); the parent waits, stops tracing, makes OFF stores, starts
 *     it again and makes ROI stores;
 *   two arguments: PLAIN stores, nothing else. */
#include <sys/wait.h>
#include <unistd.h>

#include "tierlab_trace.h"

enum { PARENT = 1000, CHILD = 3000, EXEC = 700, OFF = 500, ROI = 200, PLAIN = 1000 };
static volatile long A[4096];

static void stores(long n) {
    for (long i = 0; i < n; i++) A[i] = i;
}

int main(int argc, char **argv) {
    if (argc == 2) {
        stores(EXEC);
        return 0;
    }
    if (argc == 3) {
        stores(PLAIN);
        return 0;
    }
    stores(PARENT);
    pid_t p = fork();
    if (p == 0) {
        stores(CHILD);
        execl("/proc/self/exe", "fork_roi", "exec", (char *)0);
        _exit(1);
    }
    waitpid(p, 0, 0);
    TIERLAB_TRACE_STOP();
    stores(OFF);
    TIERLAB_TRACE_START();
    stores(ROI);
    (void)argv;
    return 0;
}
