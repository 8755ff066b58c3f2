/* tierlab's allocation interposer: records where a program's memory comes from, and places
 * chosen allocation sites on a NUMA node.
 *
 * Two builds of this one file:
 *   - linked into a program traced by `tierlab trace --cc` (-DTIERLAB_ALLOC_LINKED, beside
 *     tierlab_trace_rt.c, which calls tierlab_alloc_map_event() from its mmap/munmap/mremap and
 *     gives each event the thread's access index through tierlab_trace_index());
 *   - a shared object for LD_PRELOAD (unmodified programs: `tierlab record --alloc-sites`,
 *     `tierlab place run`), which interposes mmap/munmap/mremap itself.
 *
 * Interposed: malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc, C++ operator new/new[]/delete/delete[] (every variant the
 * Itanium C++ ABI mangles: sized, nothrow, aligned), mmap/munmap/mremap. libstdc++'s operator
 * new calls malloc: the new wrapper notes its own call site first, so the site recorded is
 * the user's `new`, not libstdc++'s malloc call. gfortran's ALLOCATE calls malloc from the
 * program's code.
 *
 * Call stacks: up to MAX_FRAMES return addresses, innermost first. Frame 0 is exact
 * (__builtin_return_address(0) of the interposed function). Further frames follow the frame
 * pointer chain (rbp on x86-64, x29 on AArch64): exact when the program keeps frame pointers
 * (`tierlab trace --cc` compiles with -fno-omit-frame-pointer); in code built without them
 * the chain stops at the first link that does not point further up the thread's stack, or
 * gives a caller that is not the real one. No unwind tables are read: a walk costs a few
 * loads. $TIERLAB_ALLOC_FRAMES (1..MAX_FRAMES) sets the depth.
 *
 * Recording ($TIERLAB_TRACE_DIR when linked, $TIERLAB_ALLOC_DIR when preloaded): allocs.bin,
 * 112-byte little-endian records in the order the events happened (struct arec below), and
 * allocmaps.txt, /proc/self/maps at the start and at exit ("snapshot NS WHY" ... "end") to
 * symbolise the frames. Times are CLOCK_MONOTONIC ns (absolute when preloaded; from the
 * trace's start when linked).
 *
 * Placement ($TIERLAB_PLACE_SITES=FILE, written by `tierlab place run`): lines
 * "fast NODE", "slow NODE", "log PATH", "site ID OBJECT_PATH FILE_OFFSET" (the return
 * address of the site's allocator call in that file). At start the process's default policy
 * becomes MPOL_BIND to the slow node (set_mempolicy); an allocation whose frame-0 return
 * address is a chosen site's gets pages of its own in a reserved region and is mbind()ed
 * (MPOL_BIND) to the fast node. Every system call is written to the log with its result
 * (and, at free and at exit, the node the block's first page is on).
 *
 * Written for tierlab (MIT licence). Build: cc -O2 -fPIC -fno-omit-frame-pointer
 *   -fno-tree-loop-distribute-patterns [-DTIERLAB_ALLOC_LINKED] -c tierlab_alloc_rt.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAMES 8
#define RECS 4096u
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define EXPORT __attribute__((visibility("default"), noinline))

enum {
    K_MALLOC = 0, K_CALLOC, K_REALLOC, K_FREE, K_POSIX_MEMALIGN, K_ALIGNED_ALLOC, K_MEMALIGN,
    K_NEW, K_NEW_ARR, K_DELETE, K_DELETE_ARR, K_MMAP, K_MUNMAP, K_MREMAP
};

struct arec {
    uint64_t ns, index, addr, size, old;
    uint64_t frames[MAX_FRAMES];
    uint32_t tid;
    uint16_t kind, nframes;
};
_Static_assert(sizeof(struct arec) == 112, "allocs.bin records are 112 bytes");

#ifdef TIERLAB_ALLOC_LINKED
uint64_t tierlab_trace_index(void) __attribute__((weak));
uint64_t tierlab_trace_ns(void) __attribute__((weak));
#endif
extern void *__libc_stack_end;
/* glibc's checked copy: calls libc's own memcpy, never an interposed one. */
extern void *__memcpy_chk(void *, const void *, size_t, size_t);

static int rec_on, place_on, log_fd = -1, out_fd = -1, depth = 4, my_pid;
static char out_dir[2048];
static struct arec recbuf[RECS];
static unsigned rec_n;
static uint64_t rec_seq;
static int rec_spin, log_spin;

/* This thread is inside the interposer: do not record. volatile: glibc declares dlsym a
 * leaf function, yet its allocations call back into malloc here. */
static TLS volatile int in_hook;
static TLS int tls_tid;
static TLS uintptr_t tls_stack_hi;
static TLS int pend_kind = -1; /* operator new's kind and site, for the malloc it calls */
static TLS int pend_n;
static TLS uint64_t pend_frames[MAX_FRAMES];

/* String helpers of our own: in a traced program libc's memory functions are interposed and
 * recorded (tierlab_libc_rt.c), and the runtime's work is not the program's. */
static size_t s_len(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}
static int s_prefix(const char *s, const char *p) {
    while (*p)
        if (*s++ != *p++) return 0;
    return 1;
}
static const char *s_chr(const char *s, const char *end, char c) {
    for (; s < end; s++)
        if (*s == c) return s;
    return NULL;
}

static void spin_lock(int *l) {
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)) sched_yield();
}
static void spin_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = syscall(SYS_write, fd, c, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return;
        }
        c += k;
        n -= (size_t)k;
    }
}

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* -- the real allocator ------------------------------------------------------------------ */
/* dlsym may allocate (its error buffer): while it runs, allocations come from a static pool
 * and are never freed. */
static char boot_pool[1 << 16];
static size_t boot_used;
static volatile int resolving; /* volatile: see in_hook */

static void *boot_alloc(size_t n) {
    size_t a = (boot_used + 15) & ~(size_t)15;
    if (a + n > sizeof boot_pool) return NULL;
    boot_used = a + n;
    return boot_pool + a;
}
static int is_boot(const void *p) {
    return (const char *)p >= boot_pool && (const char *)p < boot_pool + sizeof boot_pool;
}

static void *(*r_malloc)(size_t);
static void *(*r_calloc)(size_t, size_t);
static void *(*r_realloc)(void *, size_t);
static void (*r_free)(void *);
static int (*r_posix_memalign)(void **, size_t, size_t);
static void *(*r_aligned_alloc)(size_t, size_t);
static void *(*r_memalign)(size_t, size_t);
static void *(*r_valloc)(size_t);
static void *(*r_pvalloc)(size_t);
static size_t (*r_usable)(void *);

static void init(void);
static void resolve(void) {
    if (r_malloc || resolving) return;
    resolving = 1;
    r_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    r_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    r_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    r_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    r_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    r_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
    r_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
    r_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
    r_usable = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
    void *m = dlsym(RTLD_NEXT, "malloc");
    if (!m || !r_free || !r_calloc || !r_realloc) {
        static const char msg[] = "tierlab allocation interposer: libc's malloc was not found\n";
        write_all(2, msg, sizeof msg - 1);
        abort();
    }
    __atomic_store_n(&r_malloc, (void *(*)(size_t))m, __ATOMIC_RELEASE);
    resolving = 0;
    init();
}

/* -- call stacks ------------------------------------------------------------------------- */
static uintptr_t stack_hi(void) {
    if (tls_stack_hi == 0) {
        if (tls_tid == 0) tls_tid = (int)syscall(SYS_gettid);
        /* The main thread's stack ends above __libc_stack_end; another thread's descriptor
         * (pthread_self) sits at the top of its stack block. */
        tls_stack_hi = tls_tid == (int)getpid() ? (uintptr_t)__libc_stack_end : (uintptr_t)pthread_self();
    }
    return tls_stack_hi;
}

/* Frames of the interposed function whose frame address is `fp` and return address `ret`. */
static int unwind(void *fp, void *ret, uint64_t *out) {
    int n = 0;
    out[n++] = (uint64_t)(uintptr_t)ret;
    uintptr_t hi = stack_hi();
    uintptr_t *f = (uintptr_t *)fp;
    while (n < depth) {
        uintptr_t next = f[0];
        if (next <= (uintptr_t)f || next >= hi || (next & 7) || next - (uintptr_t)f > (64u << 20)) break;
        if (next + 2 * sizeof(uintptr_t) > hi) break;
        f = (uintptr_t *)next;
        uintptr_t r = f[1];
        if (r < 4096) break;
        out[n++] = r;
    }
    return n;
}

/* -- recording ----------------------------------------------------------------------------- */
static void flush_recs(void) {
    if (rec_n && out_fd >= 0) write_all(out_fd, recbuf, sizeof(struct arec) * rec_n);
    rec_n = 0;
}

static void record(int kind, uint64_t addr, uint64_t size, uint64_t old, const uint64_t *frames, int nframes) {
    if (!rec_on || in_hook) return;
    in_hook++;
    if (tls_tid == 0) tls_tid = (int)syscall(SYS_gettid);
    struct arec r = {0};
#ifdef TIERLAB_ALLOC_LINKED
    r.ns = tierlab_trace_ns ? tierlab_trace_ns() : mono_ns();
    r.index = tierlab_trace_index ? tierlab_trace_index() : ~0ull;
#else
    r.ns = mono_ns();
    r.index = ~0ull;
#endif
    r.addr = addr;
    r.size = size;
    r.old = old;
    r.tid = (uint32_t)tls_tid;
    r.kind = (uint16_t)kind;
    r.nframes = (uint16_t)nframes;
    for (int i = 0; i < nframes && i < MAX_FRAMES; i++) r.frames[i] = frames[i];
    spin_lock(&rec_spin);
    recbuf[rec_n++] = r;
    rec_seq++;
    if (rec_n == RECS) flush_recs();
    spin_unlock(&rec_spin);
    in_hook--;
}

static char snap_buf[1 << 20];
static void maps_snapshot(const char *why) {
    char path[2200];
    snprintf(path, sizeof path, "%s/allocmaps.txt", out_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (in >= 0) {
        char head[96];
        int h = snprintf(head, sizeof head, "snapshot %llu %s\n", (unsigned long long)mono_ns(), why);
        write_all(fd, head, (size_t)h);
        size_t n = 0;
        for (;;) {
            ssize_t k = read(in, snap_buf + n, sizeof snap_buf - 1 - n);
            if (k <= 0) break;
            n += (size_t)k;
            if (n >= sizeof snap_buf - 1) break;
        }
        close(in);
        write_all(fd, snap_buf, n);
        write_all(fd, "end\n", 4);
    }
    close(fd);
}

/* -- placement ----------------------------------------------------------------------------- */
#define SITES 4096
#define HASH (SITES * 4)
static uint64_t site_ret[HASH]; /* absolute return address -> site id + 1 */
static uint32_t site_id[HASH];
static int fast_node = -1, slow_node = -1;
static char *arena, *arena_next, *arena_end;
static int arena_spin;
static long page_size = 4096;
#define ARENA_BYTES (1ull << 40)
#define HDR_MAGIC 0x74696572616c6c63ull
#define FAST_HDR 64

struct fast_hdr {
    uint64_t magic;
    uint64_t size;   /* bytes asked for */
    uint64_t length; /* bytes mapped, from `base` */
    char *base;
    uint32_t site;
    uint32_t pad[3];
};
_Static_assert(sizeof(struct fast_hdr) <= FAST_HDR, "the header fits before the block");

static void plog(const char *fmt, ...) {
    if (log_fd < 0) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    spin_lock(&log_spin);
    write_all(log_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    spin_unlock(&log_spin);
}

static long sys_mbind(void *a, unsigned long len, int mode, const unsigned long *mask, unsigned long maxnode) {
    return syscall(SYS_mbind, a, len, mode, mask, maxnode, 0ul);
}

static int node_of(void *p) {
    int node = -1;
    /* MPOL_F_NODE | MPOL_F_ADDR */
    if (syscall(SYS_get_mempolicy, &node, NULL, 0ul, p, 3ul) != 0) return -1;
    return node;
}

static void add_site(uint64_t ret, uint32_t id) {
    uint64_t h = (ret * 0x9E3779B97F4A7C15ull) >> 50;
    for (unsigned i = 0; i < HASH; i++) {
        unsigned k = (unsigned)((h + i) % HASH);
        if (site_ret[k] == 0 || site_ret[k] == ret) {
            site_ret[k] = ret;
            site_id[k] = id;
            return;
        }
    }
}

static int find_site(uint64_t ret) {
    uint64_t h = (ret * 0x9E3779B97F4A7C15ull) >> 50;
    for (unsigned i = 0; i < HASH; i++) {
        unsigned k = (unsigned)((h + i) % HASH);
        if (site_ret[k] == 0) return -1;
        if (site_ret[k] == ret) return (int)site_id[k];
    }
    return -1;
}

/* The load address of file offset `off` of `path` (from /proc/self/maps), or 0. */
static uint64_t map_file_offset(const char *maps, size_t n, const char *path, uint64_t off) {
    const char *p = maps, *end = maps + n;
    while (p < end) {
        const char *eol = s_chr(p, end, '\n');
        if (!eol) eol = end;
        unsigned long long lo, hi, fo;
        char perms[8];
        int name_at = 0;
        if (sscanf(p, "%llx-%llx %7s %llx %*s %*s %n", &lo, &hi, perms, &fo, &name_at) >= 4 && name_at > 0) {
            const char *name = p + name_at;
            size_t len = (size_t)(eol - name);
            if (len == s_len(path) && s_prefix(name, path) && off >= fo && off < fo + (hi - lo))
                return lo + (off - fo);
        }
        p = eol + 1;
    }
    return 0;
}

static void place_init(const char *cfg) {
    static char text[1 << 20];
    int fd = open(cfg, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return;
    text[n] = 0;
    int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    size_t mn = 0;
    if (mfd >= 0) {
        for (;;) {
            ssize_t k = read(mfd, snap_buf + mn, sizeof snap_buf - 1 - mn);
            if (k <= 0) break;
            mn += (size_t)k;
        }
        close(mfd);
    }
    page_size = sysconf(_SC_PAGESIZE);
    int sites = 0, resolved = 0;
    for (char *line = text; line && *line;) {
        char *eol = (char *)s_chr(line, line + s_len(line), '\n');
        if (eol) *eol = 0;
        char path[1024];
        unsigned long long off;
        unsigned id;
        int node;
        if (sscanf(line, "fast %d", &node) == 1) fast_node = node;
        else if (sscanf(line, "slow %d", &node) == 1) slow_node = node;
        else if (s_prefix(line, "log ")) log_fd = open(line + 4, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        else if (sscanf(line, "site %u %1023s %llx", &id, path, &off) == 3) {
            sites++;
            uint64_t a = map_file_offset(snap_buf, mn, path, off);
            if (a) {
                add_site(a, id);
                resolved++;
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    plog("start pid=%d fast=%d slow=%d sites=%d resolved=%d\n", (int)getpid(), fast_node, slow_node, sites, resolved);
    if (slow_node >= 0 && slow_node < 64) {
        unsigned long mask = 1ul << slow_node;
        long rc = syscall(SYS_set_mempolicy, 2 /* MPOL_BIND */, &mask, 65ul);
        plog("set_mempolicy MPOL_BIND node=%d rc=%ld errno=%d\n", slow_node, rc, rc ? errno : 0);
    }
    if (fast_node >= 0 && fast_node < 64 && resolved) {
        void *a = (void *)syscall(SYS_mmap, NULL, ARENA_BYTES, PROT_NONE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (a != MAP_FAILED) {
            arena = arena_next = a;
            arena_end = arena + ARENA_BYTES;
        }
        plog("arena %p bytes=%llu\n", a, (unsigned long long)ARENA_BYTES);
    }
    place_on = arena != NULL;
}

static int in_arena(const void *p) { return arena && (const char *)p >= arena && (const char *)p < arena_end; }

/* A block of `size` bytes aligned to `align` for site `site`, bound to the fast node. */
static void *fast_alloc(size_t size, size_t align, uint32_t site, int kind) {
    /* The block starts FAST_HDR bytes (or its alignment, if larger) into its first page. */
    if (align < 16) align = 16;
    size_t hdr = align > FAST_HDR ? align : FAST_HDR;
    size_t length = (hdr + size + (size_t)page_size - 1) & ~((size_t)page_size - 1);
    if (length < size) return NULL;
    spin_lock(&arena_spin);
    char *base = arena_next;
    if ((size_t)(arena_end - base) < length) {
        spin_unlock(&arena_spin);
        return NULL;
    }
    arena_next += length;
    spin_unlock(&arena_spin);
    if (syscall(SYS_mprotect, base, length, PROT_READ | PROT_WRITE) != 0) return NULL;
    unsigned long mask = 1ul << fast_node;
    long rc = sys_mbind(base, length, 2 /* MPOL_BIND */, &mask, 65ul);
    plog("mbind site=%u kind=%d addr=%p len=%zu size=%zu node=%d rc=%ld errno=%d\n", site, kind, (void *)(base + hdr),
         length, size, fast_node, rc, rc ? errno : 0);
    struct fast_hdr *h = (struct fast_hdr *)(base + hdr) - 1;
    h->magic = HDR_MAGIC;
    h->size = size;
    h->length = length;
    h->base = base;
    h->site = site;
    return base + hdr;
}

static void fast_free(void *p) {
    struct fast_hdr *h = (struct fast_hdr *)p - 1;
    if (h->magic != HDR_MAGIC) return;
    plog("free site=%u addr=%p node=%d\n", h->site, p, node_of(p));
    h->magic = 0;
    char *base = h->base;
    size_t length = h->length;
    syscall(SYS_madvise, base, length, MADV_DONTNEED);
    syscall(SYS_mprotect, base, length, PROT_NONE);
}

static int chosen(const uint64_t *frames) {
    if (!place_on || frames == NULL) return -1;
    return find_site(frames[0]);
}

/* -- start and exit ------------------------------------------------------------------------ */
static void at_exit(void) {
    if (rec_on && (int)syscall(SYS_getpid) == my_pid) {
        spin_lock(&rec_spin);
        flush_recs();
        spin_unlock(&rec_spin);
        maps_snapshot("exit");
    }
    if (log_fd >= 0) plog("exit pid=%d\n", (int)getpid());
}

/* -- processes ---------------------------------------------------------------------------- */
/* Every process records into a directory of its own, as the trace runtime's processes do.
 * Linked, that is the trace runtime's directory for the process (tierlab_trace_proc_dir():
 * the top one for the first process, p<PID>... for a forked child or an exec'd program).
 * Preloaded, the first process ($TIERLAB_ALLOC_ROOT unset: it sets it) writes into
 * $TIERLAB_ALLOC_DIR, every later one (a forked child, a program exec'd with the environment)
 * into p<PID> there (p<PID>-2, -3, ... when that exists) and appends one line to
 * processes.log in the top directory:
 *   process <pid> <parent pid> <CLOCK_MONOTONIC ns> <start|fork|exec> <directory> <executable>
 */
#ifdef TIERLAB_ALLOC_LINKED
const char *tierlab_trace_proc_dir(void) __attribute__((weak));
#else
static char base_dir[sizeof out_dir - 32]; /* room for /p<PID>-<K> */

static void proc_log(const char *how) {
    char path[2200], exe[1024], line[3400];
    snprintf(path, sizeof path, "%s/processes.log", base_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *rel = s_len(out_dir) == s_len(base_dir) ? "." : out_dir + s_len(base_dir) + 1;
    int k = snprintf(line, sizeof line, "process %d %d %llu %s %s %s\n", (int)getpid(), (int)getppid(),
                     (unsigned long long)mono_ns(), how, rel, exe);
    if (k > 0) write_all(fd, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1); /* one write: O_APPEND */
    close(fd);
}

/* out_dir for this process under base_dir; 0 when it cannot be made. */
static int proc_dir_init(const char *how) {
    if (!getenv("TIERLAB_ALLOC_ROOT")) {
        char v[32];
        snprintf(v, sizeof v, "%d", (int)getpid());
        setenv("TIERLAB_ALLOC_ROOT", v, 1);
        for (size_t i = 0; i <= s_len(base_dir); i++) out_dir[i] = base_dir[i];
        return 1;
    }
    for (int k = 1; k < 1000; k++) {
        if (k == 1)
            snprintf(out_dir, sizeof out_dir, "%s/p%d", base_dir, (int)getpid());
        else
            snprintf(out_dir, sizeof out_dir, "%s/p%d-%d", base_dir, (int)getpid(), k);
        if (syscall(SYS_mkdir, out_dir, 0755) == 0) {
            proc_log(how);
            return 1;
        }
        if (errno != EEXIST) return 0;
    }
    return 0;
}
#endif

/* Opens out_dir/allocs.bin and notes the mappings; rec_on when it could. */
static void start_recording(const char *why) {
    char path[2200];
    snprintf(path, sizeof path, "%s/allocs.bin", out_dir);
    out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd >= 0) {
        maps_snapshot(why);
        rec_on = 1;
    }
}

/* Fork: 0 before (the forking thread takes the buffer's lock, and records nothing until the
 * fork is done), 1 in the parent, 2 in the child. The child's copy of the buffer holds the
 * parent's events (the parent writes them): dropped; the child records into its own
 * directory from here on, its forking thread with its new thread id. Linked, the trace
 * runtime calls this from its own fork handlers, after its own child handler. */
EXPORT void tierlab_alloc_fork(int phase) {
    if (phase == 0) {
        in_hook++;
        spin_lock(&rec_spin);
        return;
    }
    if (phase == 1) {
        spin_unlock(&rec_spin);
        in_hook--;
        return;
    }
    rec_n = 0;
    spin_unlock(&rec_spin);
    tls_tid = 0;
    if (rec_on) {
        rec_on = 0;
        if (out_fd >= 0) close(out_fd);
        out_fd = -1;
        my_pid = (int)getpid();
#ifdef TIERLAB_ALLOC_LINKED
        const char *d = tierlab_trace_proc_dir ? tierlab_trace_proc_dir() : NULL;
        if (d && s_len(d) < sizeof out_dir) {
            for (size_t i = 0; i <= s_len(d); i++) out_dir[i] = d[i];
            start_recording("fork");
        }
#else
        if (proc_dir_init("fork")) start_recording("fork");
#endif
    }
    in_hook--;
}
/* A process that execs or leaves by _exit runs no atexit handler: its events are written
 * before (linked: the trace runtime's exec and _exit call this; preloaded: this file's). An
 * exec that fails goes on recording into the same file. */
EXPORT void tierlab_alloc_leaving(void) { at_exit(); }

#ifndef TIERLAB_ALLOC_LINKED
#define REAL_FN(ret, name, params)                                \
    static ret(*real_##name) params;                              \
    static void find_##name(void) {                               \
        if (!real_##name) {                                       \
            in_hook++;                                            \
            real_##name = (ret(*) params)dlsym(RTLD_NEXT, #name); \
            in_hook--;                                            \
        }                                                         \
    }
REAL_FN(int, execve, (const char *, char *const[], char *const[]))
REAL_FN(int, execv, (const char *, char *const[]))
REAL_FN(int, execvp, (const char *, char *const[]))
REAL_FN(int, execvpe, (const char *, char *const[], char *const[]))

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    tierlab_alloc_leaving();
    find_execve();
    return real_execve(path, argv, envp);
}
EXPORT int execv(const char *path, char *const argv[]) {
    tierlab_alloc_leaving();
    find_execv();
    return real_execv(path, argv);
}
EXPORT int execvp(const char *file, char *const argv[]) {
    tierlab_alloc_leaving();
    find_execvp();
    return real_execvp(file, argv);
}
EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    tierlab_alloc_leaving();
    find_execvpe();
    return real_execvpe(file, argv, envp);
}

/* execl, execlp, execle: their arguments into an argv (at most 4096). */
#define EXECL_ARGV(first, ap, argv)                                      \
    char *argv[4097];                                                   \
    int argc_ = 0;                                                      \
    argv[argc_++] = (char *)(first);                                    \
    while (argc_ < 4096 && (argv[argc_] = va_arg(ap, char *))) argc_++; \
    argv[argc_] = NULL

EXPORT int execl(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    EXECL_ARGV(arg, ap, argv);
    va_end(ap);
    return execv(path, argv);
}
EXPORT int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    EXECL_ARGV(arg, ap, argv);
    va_end(ap);
    return execvp(file, argv);
}
EXPORT int execle(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    EXECL_ARGV(arg, ap, argv);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

EXPORT void _exit(int status) {
    tierlab_alloc_leaving();
    for (;;) syscall(SYS_exit_group, status);
}
void _Exit(int status) __attribute__((alias("_exit")));
#endif

static void fork_prepare(void) { tierlab_alloc_fork(0); }
static void fork_parent(void) { tierlab_alloc_fork(1); }
static void fork_child(void) { tierlab_alloc_fork(2); }

static void init(void) {
    static int done;
    if (done || !r_malloc) return;
    done = 1;
    in_hook++;
    my_pid = (int)getpid();
    const char *d = getenv("TIERLAB_ALLOC_FRAMES");
    if (d && *d) {
        int v = atoi(d);
        depth = v < 1 ? 1 : v > MAX_FRAMES ? MAX_FRAMES : v;
    }
    int own_fork_handlers = 1;
#ifdef TIERLAB_ALLOC_LINKED
    /* The first traced process is the one that finds $TIERLAB_TRACE_ROOT unset (the trace
     * runtime sets it when it starts): it writes into $TIERLAB_TRACE_DIR; any other into the
     * trace runtime's directory for it. */
    d = getenv("TIERLAB_TRACE_DIR");
    if (d && *d && getenv("TIERLAB_TRACE_ROOT") && tierlab_trace_proc_dir) d = tierlab_trace_proc_dir();
    if (tierlab_trace_proc_dir) own_fork_handlers = 0; /* the trace runtime's call it */
    if (d && *d && s_len(d) < sizeof out_dir) {
        for (size_t i = 0; i <= s_len(d); i++) out_dir[i] = d[i];
        start_recording("start");
    }
#else
    d = getenv("TIERLAB_ALLOC_DIR");
    if (d && *d && s_len(d) < sizeof base_dir) {
        for (size_t i = 0; i <= s_len(d); i++) base_dir[i] = d[i];
        if (proc_dir_init("exec")) start_recording("start");
    }
#endif
    const char *cfg = getenv("TIERLAB_PLACE_SITES");
    if (cfg && *cfg) place_init(cfg);
    if (rec_on && own_fork_handlers) pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (rec_on || log_fd >= 0) atexit(at_exit);
    in_hook--;
}

__attribute__((constructor(102))) static void ctor(void) { resolve(); }

/* -- the interposed allocator ------------------------------------------------------------- */
#define FRAMES(n, fr)                                                          \
    uint64_t fr[MAX_FRAMES];                                                   \
    int n;                                                                     \
    if (pend_kind >= 0) {                                                      \
        n = pend_n;                                                            \
        for (int i_ = 0; i_ < n; i_++) fr[i_] = pend_frames[i_];               \
    } else {                                                                   \
        n = unwind(__builtin_frame_address(0), __builtin_return_address(0), fr); \
    }
#define KIND(k) (pend_kind >= 0 ? pend_kind : (k))
#define ACTIVE() (!in_hook && (rec_on || place_on))

static void *alloc_common(int kind, size_t size, size_t align, const uint64_t *fr, int *done) {
    *done = 0;
    int s = chosen(fr);
    if (s < 0) return NULL;
    *done = 1;
    in_hook++;
    void *p = fast_alloc(size, align, (uint32_t)s, kind);
    in_hook--;
    return p;
}

EXPORT void *malloc(size_t size) {
    if (!r_malloc) {
        if (resolving) return boot_alloc(size);
        resolve();
    }
    if (!ACTIVE()) return r_malloc(size);
    FRAMES(n, fr);
    int k = KIND(K_MALLOC), done;
    void *p = alloc_common(k, size, 0, fr, &done);
    if (!done) p = r_malloc(size);
    if (p) record(k, (uint64_t)(uintptr_t)p, size, 0, fr, n);
    return p;
}

EXPORT void *calloc(size_t nmemb, size_t size) {
    if (!r_malloc) {
        if (resolving) {
            size_t t = nmemb * size;
            void *p = boot_alloc(t);
            if (p)
                for (size_t i = 0; i < t; i++) ((volatile char *)p)[i] = 0;
            return p;
        }
        resolve();
    }
    if (!ACTIVE()) return r_calloc(nmemb, size);
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    FRAMES(n, fr);
    int done;
    void *p = alloc_common(K_CALLOC, total, 0, fr, &done); /* fresh pages are zero */
    if (!done) p = r_calloc(nmemb, size);
    if (p) record(K_CALLOC, (uint64_t)(uintptr_t)p, total, 0, fr, n);
    return p;
}

static size_t old_size(void *p) {
    if (in_arena(p)) return ((struct fast_hdr *)p - 1)->size;
    return r_usable ? r_usable(p) : 0;
}

static void free_block(void *p) {
    if (in_arena(p)) {
        in_hook++;
        fast_free(p);
        in_hook--;
    } else {
        r_free(p);
    }
}

static void *realloc_impl(void *old, size_t size, const uint64_t *fr) {
    if (old == NULL || is_boot(old)) {
        int done;
        void *p = alloc_common(K_REALLOC, size, 0, fr, &done);
        if (!done) p = r_malloc(size);
        if (p && old) __memcpy_chk(p, old, size, size); /* a boot block: its pool's bytes remain */
        return p;
    }
    int s = chosen(fr);
    if (s < 0 && !in_arena(old)) return r_realloc(old, size);
    if (in_arena(old) && size <= ((struct fast_hdr *)old - 1)->length - (size_t)((char *)old - ((struct fast_hdr *)old - 1)->base)) {
        ((struct fast_hdr *)old - 1)->size = size;
        return old;
    }
    void *p;
    if (s >= 0) {
        in_hook++;
        p = fast_alloc(size, 0, (uint32_t)s, K_REALLOC);
        in_hook--;
    } else {
        p = r_malloc(size);
    }
    if (!p) return NULL;
    size_t keep = old_size(old);
    __memcpy_chk(p, old, keep < size ? keep : size, size);
    free_block(old);
    return p;
}

EXPORT void *realloc(void *old, size_t size) {
    if (!r_malloc) {
        if (resolving) return boot_alloc(size);
        resolve();
    }
    if (!ACTIVE()) return in_arena(old) ? realloc_impl(old, size, NULL) : r_realloc(old, size);
    FRAMES(n, fr);
    void *p = realloc_impl(old, size, fr);
    if (p || size == 0) record(K_REALLOC, (uint64_t)(uintptr_t)p, size, (uint64_t)(uintptr_t)old, fr, n);
    return p;
}

EXPORT void *reallocarray(void *old, size_t nmemb, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (!r_malloc) {
        if (resolving) return boot_alloc(total);
        resolve();
    }
    if (!ACTIVE()) return in_arena(old) ? realloc_impl(old, total, NULL) : r_realloc(old, total);
    FRAMES(n, fr);
    void *p = realloc_impl(old, total, fr);
    if (p || total == 0) record(K_REALLOC, (uint64_t)(uintptr_t)p, total, (uint64_t)(uintptr_t)old, fr, n);
    return p;
}

EXPORT void free(void *p) {
    if (p == NULL || is_boot(p)) return;
    if (!r_malloc) resolve();
    if (!ACTIVE()) {
        if (in_arena(p)) free_block(p);
        else r_free(p);
        return;
    }
    FRAMES(n, fr);
    record(KIND(K_FREE), (uint64_t)(uintptr_t)p, 0, 0, fr, n);
    free_block(p);
}

static void *aligned_common(int kind, size_t align, size_t size, const uint64_t *fr, int *err) {
    *err = 0;
    int done;
    void *p = alloc_common(kind, size, align, fr, &done);
    if (done) return p;
    switch (kind) {
    case K_POSIX_MEMALIGN:
        *err = r_posix_memalign(&p, align, size);
        return *err ? NULL : p;
    case K_ALIGNED_ALLOC: return r_aligned_alloc(align, size);
    default: return r_memalign(align, size);
    }
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    if (!r_malloc) resolve();
    if (!ACTIVE()) return r_posix_memalign(out, align, size);
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    FRAMES(n, fr);
    int err;
    void *p = aligned_common(K_POSIX_MEMALIGN, align, size, fr, &err);
    if (!p) return err ? err : ENOMEM;
    *out = p;
    record(KIND(K_POSIX_MEMALIGN), (uint64_t)(uintptr_t)p, size, 0, fr, n);
    return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t size) {
    if (!r_malloc) resolve();
    if (!ACTIVE()) return r_aligned_alloc(align, size);
    FRAMES(n, fr);
    int err;
    void *p = aligned_common(K_ALIGNED_ALLOC, align, size, fr, &err);
    if (p) record(KIND(K_ALIGNED_ALLOC), (uint64_t)(uintptr_t)p, size, 0, fr, n);
    return p;
}

EXPORT void *memalign(size_t align, size_t size) {
    if (!r_malloc) resolve();
    if (!ACTIVE()) return r_memalign(align, size);
    FRAMES(n, fr);
    int err;
    void *p = aligned_common(K_MEMALIGN, align, size, fr, &err);
    if (p) record(KIND(K_MEMALIGN), (uint64_t)(uintptr_t)p, size, 0, fr, n);
    return p;
}

EXPORT void *valloc(size_t size) {
    if (!r_malloc) resolve();
    if (!ACTIVE()) return r_valloc(size);
    FRAMES(n, fr);
    int err;
    void *p = aligned_common(K_MEMALIGN, (size_t)sysconf(_SC_PAGESIZE), size, fr, &err);
    if (p) record(K_MEMALIGN, (uint64_t)(uintptr_t)p, size, 0, fr, n);
    return p;
}

EXPORT void *pvalloc(size_t size) {
    if (!r_malloc) resolve();
    if (!ACTIVE()) return r_pvalloc(size);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size = (size + pg - 1) & ~(pg - 1);
    FRAMES(n, fr);
    int err;
    void *p = aligned_common(K_MEMALIGN, pg, size, fr, &err);
    if (p) record(K_MEMALIGN, (uint64_t)(uintptr_t)p, size, 0, fr, n);
    return p;
}

EXPORT size_t malloc_usable_size(void *p) {
    if (p == NULL) return 0;
    if (in_arena(p)) return ((struct fast_hdr *)p - 1)->size;
    if (is_boot(p)) return 0;
    if (!r_malloc) resolve();
    return r_usable ? r_usable(p) : 0;
}

/* -- C++ operator new / delete ------------------------------------------------------------ */
/* The wrapper notes its caller's stack and kind, then calls libstdc++'s operator (which runs
 * the new-handler loop and throws std::bad_alloc as it should); that operator's malloc or
 * aligned_alloc call takes the noted site. A program whose every use of libstdc++'s
 * operators is this file's has no libstdc++ to call (the linker drops it with --as-needed):
 * then the block comes from malloc (aligned_alloc) directly, and a failure aborts, as an
 * exception cannot be thrown from here. */
static void *new_fallback(size_t n, size_t align) {
    void *p = align ? aligned_alloc(align, (n + align - 1) & ~(align - 1)) : malloc(n ? n : 1);
    if (!p) {
        static const char msg[] = "tierlab allocation interposer: operator new: out of memory\n";
        write_all(2, msg, sizeof msg - 1);
        abort();
    }
    return p;
}
#define NEW_OP(sym, kind, params, args, ptype, n, align)                             \
    EXPORT void *sym params {                                                        \
        static void *(*real) ptype;                                                  \
        static int looked;                                                           \
        if (!looked) {                                                               \
            in_hook++;                                                               \
            real = (void *(*)ptype)dlsym(RTLD_NEXT, #sym);                           \
            in_hook--;                                                               \
            looked = 1;                                                              \
        }                                                                            \
        if (!ACTIVE() || pend_kind >= 0) return real ? real args : new_fallback(n, align); \
        pend_n = unwind(__builtin_frame_address(0), __builtin_return_address(0), pend_frames); \
        pend_kind = (kind);                                                          \
        void *p = real ? real args : new_fallback(n, align);                         \
        pend_kind = -1;                                                              \
        return p;                                                                    \
    }
#define DEL_OP(sym, kind, params, args, ptype, p)                                    \
    EXPORT void sym params {                                                         \
        static void (*real) ptype;                                                   \
        static int looked;                                                           \
        if (!looked) {                                                               \
            in_hook++;                                                               \
            real = (void (*)ptype)dlsym(RTLD_NEXT, #sym);                            \
            in_hook--;                                                               \
            looked = 1;                                                              \
        }                                                                            \
        if (!ACTIVE() || pend_kind >= 0) {                                           \
            if (real) real args;                                                     \
            else free(p);                                                            \
            return;                                                                  \
        }                                                                            \
        pend_n = unwind(__builtin_frame_address(0), __builtin_return_address(0), pend_frames); \
        pend_kind = (kind);                                                          \
        if (real) real args;                                                         \
        else free(p);                                                                \
        pend_kind = -1;                                                              \
    }

typedef struct { int dummy; } nothrow_t_;
NEW_OP(_Znwm, K_NEW, (size_t n), (n), (size_t), n, 0)
NEW_OP(_Znam, K_NEW_ARR, (size_t n), (n), (size_t), n, 0)
NEW_OP(_ZnwmRKSt9nothrow_t, K_NEW, (size_t n, const nothrow_t_ *t), (n, t), (size_t, const nothrow_t_ *), n, 0)
NEW_OP(_ZnamRKSt9nothrow_t, K_NEW_ARR, (size_t n, const nothrow_t_ *t), (n, t), (size_t, const nothrow_t_ *), n, 0)
NEW_OP(_ZnwmSt11align_val_t, K_NEW, (size_t n, size_t a), (n, a), (size_t, size_t), n, a)
NEW_OP(_ZnamSt11align_val_t, K_NEW_ARR, (size_t n, size_t a), (n, a), (size_t, size_t), n, a)
NEW_OP(_ZnwmSt11align_val_tRKSt9nothrow_t, K_NEW, (size_t n, size_t a, const nothrow_t_ *t), (n, a, t),
       (size_t, size_t, const nothrow_t_ *), n, a)
NEW_OP(_ZnamSt11align_val_tRKSt9nothrow_t, K_NEW_ARR, (size_t n, size_t a, const nothrow_t_ *t), (n, a, t),
       (size_t, size_t, const nothrow_t_ *), n, a)
DEL_OP(_ZdlPv, K_DELETE, (void *p), (p), (void *), p)
DEL_OP(_ZdaPv, K_DELETE_ARR, (void *p), (p), (void *), p)
DEL_OP(_ZdlPvm, K_DELETE, (void *p, size_t n), (p, n), (void *, size_t), p)
DEL_OP(_ZdaPvm, K_DELETE_ARR, (void *p, size_t n), (p, n), (void *, size_t), p)
DEL_OP(_ZdlPvRKSt9nothrow_t, K_DELETE, (void *p, const nothrow_t_ *t), (p, t), (void *, const nothrow_t_ *), p)
DEL_OP(_ZdaPvRKSt9nothrow_t, K_DELETE_ARR, (void *p, const nothrow_t_ *t), (p, t), (void *, const nothrow_t_ *), p)
DEL_OP(_ZdlPvSt11align_val_t, K_DELETE, (void *p, size_t a), (p, a), (void *, size_t), p)
DEL_OP(_ZdaPvSt11align_val_t, K_DELETE_ARR, (void *p, size_t a), (p, a), (void *, size_t), p)
DEL_OP(_ZdlPvmSt11align_val_t, K_DELETE, (void *p, size_t n, size_t a), (p, n, a), (void *, size_t, size_t), p)
DEL_OP(_ZdaPvmSt11align_val_t, K_DELETE_ARR, (void *p, size_t n, size_t a), (p, n, a), (void *, size_t, size_t), p)

/* The trace runtime's own allocations (dlsym's) are not recorded: it brackets them. */
EXPORT void tierlab_alloc_quiet(int delta) { in_hook += delta; }

/* -- mappings -------------------------------------------------------------------------------- */
/* Linked: tierlab_trace_rt.c's mmap/munmap/mremap call this with their own frame. */
EXPORT void tierlab_alloc_map_event(int kind, void *fp, void *ret, uint64_t addr, uint64_t len, uint64_t old) {
    if (!rec_on || in_hook) return;
    uint64_t fr[MAX_FRAMES];
    int n = unwind(fp, ret, fr);
    record(kind, addr, len, old, fr, n);
}

#ifndef TIERLAB_ALLOC_LINKED
EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && fd < 0 && rec_on && !in_hook)
        tierlab_alloc_map_event(K_MMAP, __builtin_frame_address(0), __builtin_return_address(0), (uint64_t)(uintptr_t)p,
                                len, 0);
    return p;
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

EXPORT int munmap(void *addr, size_t len) {
    int r = (int)syscall(SYS_munmap, addr, len);
    if (r == 0 && rec_on && !in_hook)
        tierlab_alloc_map_event(K_MUNMAP, __builtin_frame_address(0), __builtin_return_address(0),
                                (uint64_t)(uintptr_t)addr, len, 0);
    return r;
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    void *new_addr = va_arg(ap, void *);
    va_end(ap);
    void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
    if (p != MAP_FAILED && rec_on && !in_hook)
        tierlab_alloc_map_event(K_MREMAP, __builtin_frame_address(0), __builtin_return_address(0),
                                (uint64_t)(uintptr_t)p, new_len, (uint64_t)(uintptr_t)old);
    return p;
}
#endif
