/* tierlab's tracing runtime: linked into a program compiled with gcc's (or clang's)
 * -fsanitize=thread *instead of* the ThreadSanitizer runtime. The compiler calls
 * __tsan_readN / __tsan_writeN (and the atomic and range variants) at every load and store
 * of the instrumented code; this runtime appends each access to a per-thread buffer and
 * writes the buffers to files in $TIERLAB_TRACE_DIR:
 *
 *   t<TID>.bin   little-endian u64 per access: bit 63 = store, bits 0-62 = address
 *                (the raw per-thread format of `tierlab import raw`)
 *   t<TID>.size  one byte per access: bytes accessed
 *   t<TID>.time  little-endian u64 pairs (access index, ns since start): a checkpoint of
 *                CLOCK_MONOTONIC every CKPT accesses of the thread
 *   maps.log     the mapping history: /proc/self/maps snapshots (at start, at most every
 *                SNAP_NS at buffer flushes, when a thread starts, at exit) and the program's
 *                own mmap/munmap/mremap calls with exact times
 *   sync.bin     the program's synchronisation, 48 bytes per event in the order the events
 *                happened (little-endian): u64 seq, u64 ns since start, u64 access index (the
 *                thread's accesses before the event), u64 object, u64 arg (a barrier's
 *                participants), u32 tid, u32 kind (SYNC_* below). Recorded by interposing
 *                libgomp's entry points (GOMP_parallel*, GOMP_barrier, GOMP_loop_end,
 *                GOMP_sections_end, GOMP_critical*, GOMP_atomic*, omp_set/unset_lock),
 *                LLVM libomp's (__kmpc_*: tierlab_kmp_rt.c) and pthread's barriers,
 *                mutexes and condition variables
 *
 * Child processes (fork, and exec of another program linked with this runtime while
 * $TIERLAB_TRACE_DIR is set) write the same files in a directory of their own, p<PID> (an
 * exec in a process that already traced: p<PID>-2, -3, ...), with the same clock origin;
 * processes.log lists every traced process (see "processes" below). Windows
 * ($TIERLAB_TRACE_WINDOW) and the region-of-interest API (tierlab_trace.h) are described at
 * "windows" below.
 *
 * A read-modify-write atomic is a load and a store (as lackey's "modify"); a range access
 * (struct copies, memcpy/memset the compiler expands) is one access per 8 bytes.
 * Without $TIERLAB_TRACE_DIR the program runs and nothing is written.
 * Written for tierlab (MIT licence). Build: cc -O2 -fPIC -c tierlab_trace_rt.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BUF_RECS (1u << 16) /* accesses per flush */
#define CKPT 4096u          /* accesses per time checkpoint (divides BUF_RECS) */
#define SNAP_NS 10000000ull /* at most one maps snapshot per 10 ms */
#define STORE (1ull << 63)

/* A thread's window state: whether it records, the accesses it made (recorded or not) for
 * windows counted in accesses, and its last time checkpoint (so that a checkpoint of the
 * same record index replaces it). */
struct twin {
    int on, have_ck;
    uint64_t seen, last_ck;
    uint64_t *seg; /* pos when lim was last set */
    off_t toff;    /* bytes written to the .time file */
};

struct tbuf {
    uint64_t *pos, *lim, *end, *buf;
    uint8_t *sz;
    uint64_t index; /* accesses written before buf[0] */
    int fd, sfd, tfd, tid;
    struct tbuf *next;
    struct twin win; /* windows and the region of interest (below) */
};

static __thread struct tbuf *cur;
static struct tbuf *all_bufs;
static struct tbuf discard_buf;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t key;
static char dir[3000];
static int enabled, main_pid, maps_fd = -1, sync_fd = -1;
static uint64_t t0, last_snap;
static char snapbuf[1 << 20];
/* The allocation interposer (tierlab_alloc_rt.c), when linked: told of the mmap calls, and
 * asked not to record the runtime's own allocations. */
void tierlab_alloc_quiet(int delta) __attribute__((weak));
void tierlab_alloc_map_event(int kind, void *fp, void *ret, uint64_t addr, uint64_t len, uint64_t old)
    __attribute__((weak));

/* Set while a thread runs the runtime's own code that calls libc's memory functions or
 * allocates (process directories, logs, setenv, fork and exec handling): those calls are not
 * the program's, and neither the libc functions (tierlab_libc_rt.c) nor the allocation
 * interposer (tierlab_alloc_rt.c) record them. */
static __thread int rt_busy;
static int rt_enter(void) {
    rt_busy++;
    if (tierlab_alloc_quiet) tierlab_alloc_quiet(1);
    return 0;
}
static void rt_unbusy(int *guard) {
    (void)guard;
    if (tierlab_alloc_quiet) tierlab_alloc_quiet(-1);
    rt_busy--;
}
#define RT_BUSY() __attribute__((cleanup(rt_unbusy), unused)) int rt_busy_guard = rt_enter()

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rel_ns(void) { return now_ns() - t0; }

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return;
        }
        c += k;
        n -= (size_t)k;
    }
}

static void *raw_mmap(size_t len) {
    void *p = (void *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* One line of maps.log (the caller holds `lock`). */
static int real_mutex_lock(pthread_mutex_t *m);
static int real_mutex_unlock(pthread_mutex_t *m);
static int real_mutex_trylock(pthread_mutex_t *m);

static void log_line(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (maps_fd >= 0 && n > 0) write_all(maps_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* A /proc/self/maps snapshot into maps.log (the caller holds `lock`). */
static void snapshot(const char *why) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, snapbuf + n, sizeof snapbuf - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
        if (n >= sizeof snapbuf - 1) break;
    }
    close(fd);
    uint64_t t = rel_ns();
    last_snap = t;
    log_line("snapshot %llu %s\n", (unsigned long long)t, why);
    write_all(maps_fd, snapbuf, n);
    log_line("end\n");
}

static int open_out(int tid, const char *ext) {
    char path[3100];
    snprintf(path, sizeof path, "%s/t%d.%s", dir, tid, ext);
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/* Records of the thread written or buffered (while a window is closed, its buffer is
 * scratch). */
static uint64_t rec_index(struct tbuf *b) { return b->index + (b->win.on ? (uint64_t)(b->pos - b->buf) : 0); }

/* A time checkpoint (record index, ns): record indices strictly increase in the file; one of
 * the same index as the last replaces it (a window that recorded nothing). */
static void checkpoint_at(struct tbuf *b, uint64_t idx, uint64_t t) {
    uint64_t pair[2] = {idx, t};
    if (b->win.have_ck && idx < b->win.last_ck) return;
    if (b->win.have_ck && idx == b->win.last_ck) {
        if (b->tfd >= 0) (void)pwrite(b->tfd, pair, sizeof pair, b->win.toff - (off_t)sizeof pair);
        return;
    }
    write_all(b->tfd, pair, sizeof pair);
    b->win.toff += (off_t)sizeof pair;
    b->win.have_ck = 1;
    b->win.last_ck = idx;
}

static void checkpoint(struct tbuf *b) { checkpoint_at(b, rec_index(b), rel_ns()); }

static void flush_buf(struct tbuf *b) {
    size_t n = b->win.on ? (size_t)(b->pos - b->buf) : 0;
    if (n && b->fd >= 0) {
        write_all(b->fd, b->buf, n * 8);
        write_all(b->sfd, b->sz, n);
    }
    b->index += n;
    b->pos = b->buf;
    b->lim = b->buf + CKPT;
    b->win.seg = b->pos;
}

static void thread_done(void *p) {
    struct tbuf *b = p;
    real_mutex_lock(&lock);
    flush_buf(b);
    real_mutex_unlock(&lock);
}

static struct tbuf *new_buf(void) {
    if (!enabled || getpid() != main_pid) {
        discard_buf.pos = discard_buf.buf;
        discard_buf.lim = discard_buf.buf + CKPT;
        return &discard_buf;
    }
    size_t bytes = BUF_RECS * 9 + sizeof(struct tbuf);
    char *m = raw_mmap(bytes);
    if (!m) abort();
    struct tbuf *b = (struct tbuf *)m;
    b->buf = (uint64_t *)(m + 64 * ((sizeof(struct tbuf) + 63) / 64));
    b->end = b->buf + BUF_RECS;
    b->sz = (uint8_t *)b->end;
    b->pos = b->buf;
    b->lim = b->buf + CKPT;
    b->index = 0;
    b->win = (struct twin){.on = 1, .seg = b->pos};
    b->tid = (int)syscall(SYS_gettid);
    b->fd = open_out(b->tid, "bin");
    b->sfd = open_out(b->tid, "size");
    b->tfd = open_out(b->tid, "time");
    real_mutex_lock(&lock);
    b->next = all_bufs;
    all_bufs = b;
    if (b->tid != main_pid) {
        char why[64];
        snprintf(why, sizeof why, "thread %d", b->tid);
        snapshot(why);
    }
    real_mutex_unlock(&lock);
    pthread_setspecific(key, b);
    return b;
}

static int win_active;
static struct tbuf *win_slow(struct tbuf *b, int fresh);

/* Called when the buffer reaches its next checkpoint (or on a thread's first access). */
static __attribute__((noinline)) struct tbuf *slow(void) {
    struct tbuf *b = cur;
    if (b == NULL || (b != &discard_buf && getpid() != main_pid)) {
        b = cur = new_buf();
        if (b != &discard_buf) {
            checkpoint(b);
            if (__atomic_load_n(&win_active, __ATOMIC_RELAXED)) win_slow(b, 1);
        }
        return b;
    }
    if (b == &discard_buf) {
        b->pos = b->buf;
        b->lim = b->buf + CKPT;
        return b;
    }
    if (__atomic_load_n(&win_active, __ATOMIC_RELAXED)) return win_slow(b, 0);
    if (b->pos == b->end) {
        flush_buf(b);
        uint64_t t = rel_ns();
        if (t - last_snap >= SNAP_NS && real_mutex_trylock(&lock) == 0) {
            if (t - last_snap >= SNAP_NS) snapshot("flush");
            real_mutex_unlock(&lock);
        }
    } else {
        b->lim = b->pos + CKPT;
    }
    checkpoint(b);
    return b;
}

static inline void rec(uint64_t v, uint8_t size) {
    struct tbuf *b = cur;
    if (__builtin_expect(b == NULL || b->pos == b->lim, 0)) b = slow();
    b->sz[b->pos - b->buf] = size;
    *b->pos++ = v;
}

static void rec_range(const void *a, unsigned long size, uint64_t store) {
    uintptr_t p = (uintptr_t)a;
    while (size > 0) {
        unsigned long n = size < 8 ? size : 8;
        rec((uint64_t)p | store, (uint8_t)n);
        p += n;
        size -= n;
    }
}

static void sync_flush(void);

static void at_exit_flush(void) {
    if (!enabled || getpid() != main_pid) return;
    sync_flush();
    real_mutex_lock(&lock);
    for (struct tbuf *b = all_bufs; b; b = b->next) {
        flush_buf(b);
        checkpoint(b);
    }
    snapshot("exit");
    log_line("exit %llu\n", (unsigned long long)rel_ns());
    real_mutex_unlock(&lock);
}

static int proc_dir_init(const char *base);
static void proc_log(const char *how);
static const char *proc_how;
static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);
static void win_init(void);

static void init(void) {
    RT_BUSY();
    static int done;
    if (done) return;
    done = 1;
    t0 = now_ns();
    main_pid = (int)getpid();
    const char *t0env = getenv("TIERLAB_TRACE_T0"); /* the first traced process's clock origin */
    if (t0env && getenv("TIERLAB_TRACE_ROOT")) t0 = strtoull(t0env, NULL, 10);
    discard_buf.buf = raw_mmap(CKPT * 9 + 64);
    discard_buf.sz = (uint8_t *)(discard_buf.buf + CKPT);
    discard_buf.end = discard_buf.buf + CKPT;
    discard_buf.fd = -1;
    pthread_key_create(&key, thread_done);
    const char *d = getenv("TIERLAB_TRACE_DIR");
    if (d && *d && strlen(d) < sizeof dir - 32 && proc_dir_init(d)) {
        char path[3100];
        snprintf(path, sizeof path, "%s/maps.log", dir);
        maps_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
        enabled = maps_fd >= 0;
        snprintf(path, sizeof path, "%s/sync.bin", dir);
        if (enabled) sync_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (enabled) {
        real_mutex_lock(&lock);
        log_line("start %d\n", main_pid);
        snapshot("start");
        real_mutex_unlock(&lock);
        atexit(at_exit_flush);
        proc_log(proc_how);
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        win_init();
    }
}

__attribute__((constructor(101))) static void ctor(void) { init(); }

/* -- the compiler's interface ----------------------------------------------------------- */
void __tsan_init(void) { init(); }
void __tsan_func_entry(void *pc) { (void)pc; }
void __tsan_func_exit(void) {}
void __tsan_ignore_thread_begin(void) {}
void __tsan_ignore_thread_end(void) {}

#define RW(N)                                                                   \
    void __tsan_read##N(void *a) { rec((uint64_t)a, N); }                      \
    void __tsan_write##N(void *a) { rec((uint64_t)a | STORE, N); }             \
    void __tsan_unaligned_read##N(void *a) { rec((uint64_t)a, N); }            \
    void __tsan_unaligned_write##N(void *a) { rec((uint64_t)a | STORE, N); }   \
    void __tsan_volatile_read##N(void *a) { rec((uint64_t)a, N); }             \
    void __tsan_volatile_write##N(void *a) { rec((uint64_t)a | STORE, N); }    \
    void __tsan_unaligned_volatile_read##N(void *a) { rec((uint64_t)a, N); }   \
    void __tsan_unaligned_volatile_write##N(void *a) { rec((uint64_t)a | STORE, N); }
RW(1)
RW(2)
RW(4)
RW(8)
RW(16)

void __tsan_read_range(void *a, unsigned long size) { rec_range(a, size, 0); }
void __tsan_write_range(void *a, unsigned long size) { rec_range(a, size, STORE); }
void __tsan_vptr_update(void **vptr, void *v) { (void)v; rec((uint64_t)vptr | STORE, 8); }
void __tsan_vptr_read(void **vptr) { rec((uint64_t)vptr, 8); }

#define SEQ __ATOMIC_SEQ_CST
#define ATOMICS(N, T)                                                                                \
    T __tsan_atomic##N##_load(const volatile T *a, int mo) {                                      \
        (void)mo;                                                                                 \
        rec((uint64_t)a, N / 8);                                                                  \
        return __atomic_load_n(a, SEQ);                                                           \
    }                                                                                             \
    void __tsan_atomic##N##_store(volatile T *a, T v, int mo) {                                   \
        (void)mo;                                                                                 \
        rec((uint64_t)a | STORE, N / 8);                                                          \
        __atomic_store_n(a, v, SEQ);                                                              \
    }                                                                                             \
    T __tsan_atomic##N##_exchange(volatile T *a, T v, int mo) {                                   \
        (void)mo;                                                                                 \
        rec((uint64_t)a, N / 8);                                                                  \
        rec((uint64_t)a | STORE, N / 8);                                                          \
        return __atomic_exchange_n(a, v, SEQ);                                                    \
    }                                                                                             \
    ATOMIC_RMW(N, T, fetch_add)                                                                   \
    ATOMIC_RMW(N, T, fetch_sub)                                                                   \
    ATOMIC_RMW(N, T, fetch_and)                                                                   \
    ATOMIC_RMW(N, T, fetch_or)                                                                    \
    ATOMIC_RMW(N, T, fetch_xor)                                                                   \
    ATOMIC_RMW(N, T, fetch_nand)                                                                  \
    int __tsan_atomic##N##_compare_exchange_strong(volatile T *a, T *c, T v, int mo, int fmo) {   \
        (void)mo;                                                                                 \
        (void)fmo;                                                                                \
        rec((uint64_t)a, N / 8);                                                                  \
        int ok = __atomic_compare_exchange_n(a, c, v, 0, SEQ, SEQ);                               \
        if (ok) rec((uint64_t)a | STORE, N / 8);                                                  \
        return ok;                                                                                \
    }                                                                                             \
    int __tsan_atomic##N##_compare_exchange_weak(volatile T *a, T *c, T v, int mo, int fmo) {     \
        return __tsan_atomic##N##_compare_exchange_strong(a, c, v, mo, fmo);                      \
    }                                                                                             \
    T __tsan_atomic##N##_compare_exchange_val(volatile T *a, T c, T v, int mo, int fmo) {         \
        __tsan_atomic##N##_compare_exchange_strong(a, &c, v, mo, fmo);                            \
        return c;                                                                                 \
    }
#define ATOMIC_RMW(N, T, OP)                                        \
    T __tsan_atomic##N##_##OP(volatile T *a, T v, int mo) {         \
        (void)mo;                                                   \
        rec((uint64_t)a, N / 8);                                    \
        rec((uint64_t)a | STORE, N / 8);                            \
        return __atomic_##OP(a, v, SEQ);                            \
    }
ATOMICS(8, uint8_t)
ATOMICS(16, uint16_t)
ATOMICS(32, uint32_t)
ATOMICS(64, uint64_t)
void __tsan_atomic_thread_fence(int mo) {
    (void)mo;
    __atomic_thread_fence(SEQ);
}
void __tsan_atomic_signal_fence(int mo) { (void)mo; }

/* -- the program's own mapping calls (exact times) --------------------------------------- */
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (enabled && p != MAP_FAILED && getpid() == main_pid) {
        real_mutex_lock(&lock);
        log_line("map %llu %llx %llx %s\n", (unsigned long long)rel_ns(), (unsigned long long)(uintptr_t)p,
                 (unsigned long long)len, fd >= 0 ? "[file]" : "[anon]");
        real_mutex_unlock(&lock);
    }
    if (p != MAP_FAILED && fd < 0 && tierlab_alloc_map_event)
        tierlab_alloc_map_event(11, __builtin_frame_address(0), __builtin_return_address(0), (uint64_t)(uintptr_t)p, len, 0);
    return p;
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

int munmap(void *addr, size_t len) {
    int r = (int)syscall(SYS_munmap, addr, len);
    if (enabled && r == 0 && getpid() == main_pid) {
        real_mutex_lock(&lock);
        log_line("unmap %llu %llx %llx\n", (unsigned long long)rel_ns(), (unsigned long long)(uintptr_t)addr,
                 (unsigned long long)len);
        real_mutex_unlock(&lock);
    }
    if (r == 0 && tierlab_alloc_map_event)
        tierlab_alloc_map_event(12, __builtin_frame_address(0), __builtin_return_address(0), (uint64_t)(uintptr_t)addr, len, 0);
    return r;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    void *new_addr = va_arg(ap, void *);
    va_end(ap);
    void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
    if (enabled && p != MAP_FAILED && getpid() == main_pid) {
        real_mutex_lock(&lock);
        uint64_t t = rel_ns();
        log_line("unmap %llu %llx %llx\n", (unsigned long long)t, (unsigned long long)(uintptr_t)old,
                 (unsigned long long)old_len);
        log_line("map %llu %llx %llx [anon]\n", (unsigned long long)t, (unsigned long long)(uintptr_t)p,
                 (unsigned long long)new_len);
        real_mutex_unlock(&lock);
    }
    if (p != MAP_FAILED && tierlab_alloc_map_event)
        tierlab_alloc_map_event(13, __builtin_frame_address(0), __builtin_return_address(0), (uint64_t)(uintptr_t)p, new_len,
                                (uint64_t)(uintptr_t)old);
    return p;
}

/* -- the program's synchronisation ------------------------------------------------------ */
/* Kinds of sync.bin events (tierlab-core's schema declares the same codes, `sync.kind`). */
enum {
    SYNC_BARRIER = 0,      /* pthread_barrier_wait: arrival; arg = the barrier's count */
    SYNC_OMP_BARRIER = 1,  /* an OpenMP team barrier (explicit, a worksharing end, a region's end) */
    SYNC_MUTEX_LOCK = 2,   /* a pthread mutex acquired (lock, successful trylock, cond_wait's return) */
    SYNC_MUTEX_UNLOCK = 3, /* a pthread mutex released (unlock, entering cond_wait) */
    SYNC_COND_SIGNAL = 4,  /* pthread_cond_signal / broadcast */
    SYNC_COND_WAKE = 5,    /* pthread_cond_wait / timedwait returned */
    SYNC_OMP_FORK = 6,     /* the encountering thread starts a parallel region (object = region) */
    SYNC_OMP_START = 7,    /* a team thread starts the region's body */
    SYNC_OMP_LOCK = 8,     /* critical / atomic / omp_set_lock entered */
    SYNC_OMP_UNLOCK = 9,   /* critical / atomic / omp_unset_lock left */
};

struct syncrec {
    uint64_t seq, ns, index, object, arg;
    uint32_t tid, kind;
};
_Static_assert(sizeof(struct syncrec) == 48, "sync.bin records are 48 bytes");

#define SYNC_RECS 4096u
static struct syncrec sync_buf[SYNC_RECS];
static unsigned sync_n;
static uint64_t sync_seq;
static int sync_spin;
static __thread int sync_tid;

static void spin_lock(int *l) {
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)) sched_yield();
}
static void spin_unlock(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

static uint64_t acc_index(void) {
    struct tbuf *b = cur;
    if (b == NULL || b == &discard_buf) return 0;
    return rec_index(b);
}

/* One event of the calling thread; its sequence number is taken under the lock, so the
 * file holds the events in the order they happened. */
static void sync_event(uint32_t kind, uint64_t object, uint64_t arg) {
    if (!enabled || sync_fd < 0 || getpid() != main_pid) return;
    if (sync_tid == 0) sync_tid = (int)syscall(SYS_gettid);
    struct syncrec r = {0, rel_ns(), acc_index(), object, arg, (uint32_t)sync_tid, kind};
    spin_lock(&sync_spin);
    r.seq = sync_seq++;
    sync_buf[sync_n++] = r;
    if (sync_n == SYNC_RECS) {
        write_all(sync_fd, sync_buf, sizeof(struct syncrec) * sync_n);
        sync_n = 0;
    }
    spin_unlock(&sync_spin);
}

static void sync_flush(void) {
    spin_lock(&sync_spin);
    if (sync_fd >= 0 && sync_n) write_all(sync_fd, sync_buf, sizeof(struct syncrec) * sync_n);
    sync_n = 0;
    spin_unlock(&sync_spin);
}

/* -- for the allocation interposer (tierlab_alloc_rt.c) and the libc functions
 * (tierlab_libc_rt.c) linked beside this runtime ------------------------------------------ */
/* Whether the program is traced (no system call: in a forked child, rec() itself sends the
 * accesses to the discard buffer at its next slow path, and nothing of it is written). */
/* Whether the program's accesses are recorded now: tracing is on and the calling thread is
 * not inside the runtime's own bookkeeping (the libc memory functions the program is linked
 * with, tierlab_libc_rt.c, serve the runtime's own strcmp/strlen too). */
int tierlab_trace_active(void) { return enabled && !rt_busy; }
/* The calling thread's accesses so far (its position in its access stream). */
uint64_t tierlab_trace_index(void) { return acc_index(); }
/* ns since the trace started (the clock of the .time checkpoints). */
uint64_t tierlab_trace_ns(void) { return rel_ns(); }

/* The next definition of a symbol (libc's, libgomp's), looked up once. */
static void *next_sym(const char *name, const char *version) {
    /* dlsym's own allocations (its error strings) are not the program's. */
    if (tierlab_alloc_quiet) tierlab_alloc_quiet(1);
    void *p = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
    if (!p) p = dlsym(RTLD_NEXT, name);
    if (tierlab_alloc_quiet) tierlab_alloc_quiet(-1);
    if (!p) {
        static const char msg[] = "tierlab trace runtime: a symbol it interposes was not found\n";
        write_all(2, msg, sizeof msg - 1);
        abort();
    }
    return p;
}
#define REAL(ret, name, version, params)                                    \
    static ret(*real_##name) params;                                        \
    static inline ret(*get_##name(void)) params {                           \
        if (!real_##name) real_##name = (ret(*) params)next_sym(#name, version); \
        return real_##name;                                                 \
    }

/* -- pthread ------------------------------------------------------------------------------ */
REAL(int, pthread_mutex_lock, NULL, (pthread_mutex_t *))
REAL(int, pthread_mutex_trylock, NULL, (pthread_mutex_t *))
REAL(int, pthread_mutex_unlock, NULL, (pthread_mutex_t *))
REAL(int, pthread_cond_wait, "GLIBC_2.3.2", (pthread_cond_t *, pthread_mutex_t *))
REAL(int, pthread_cond_timedwait, "GLIBC_2.3.2",
     (pthread_cond_t *, pthread_mutex_t *, const struct timespec *))
REAL(int, pthread_cond_signal, "GLIBC_2.3.2", (pthread_cond_t *))
REAL(int, pthread_cond_broadcast, "GLIBC_2.3.2", (pthread_cond_t *))
REAL(int, pthread_barrier_init, NULL, (pthread_barrier_t *, const pthread_barrierattr_t *, unsigned))
REAL(int, pthread_barrier_wait, NULL, (pthread_barrier_t *))

static int real_mutex_lock(pthread_mutex_t *m) { return get_pthread_mutex_lock()(m); }
static int real_mutex_unlock(pthread_mutex_t *m) { return get_pthread_mutex_unlock()(m); }
static int real_mutex_trylock(pthread_mutex_t *m) { return get_pthread_mutex_trylock()(m); }

int pthread_mutex_lock(pthread_mutex_t *m) {
    int r = real_mutex_lock(m);
    if (r == 0 && m != &lock) sync_event(SYNC_MUTEX_LOCK, (uint64_t)(uintptr_t)m, 0);
    return r;
}
int pthread_mutex_trylock(pthread_mutex_t *m) {
    int r = real_mutex_trylock(m);
    if (r == 0 && m != &lock) sync_event(SYNC_MUTEX_LOCK, (uint64_t)(uintptr_t)m, 0);
    return r;
}
int pthread_mutex_unlock(pthread_mutex_t *m) {
    if (m != &lock) sync_event(SYNC_MUTEX_UNLOCK, (uint64_t)(uintptr_t)m, 0);
    return real_mutex_unlock(m);
}
int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    sync_event(SYNC_MUTEX_UNLOCK, (uint64_t)(uintptr_t)m, 0);
    int r = get_pthread_cond_wait()(c, m);
    sync_event(SYNC_COND_WAKE, (uint64_t)(uintptr_t)c, 0);
    sync_event(SYNC_MUTEX_LOCK, (uint64_t)(uintptr_t)m, 0);
    return r;
}
int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) {
    sync_event(SYNC_MUTEX_UNLOCK, (uint64_t)(uintptr_t)m, 0);
    int r = get_pthread_cond_timedwait()(c, m, t);
    if (r == 0) sync_event(SYNC_COND_WAKE, (uint64_t)(uintptr_t)c, 0);
    sync_event(SYNC_MUTEX_LOCK, (uint64_t)(uintptr_t)m, 0);
    return r;
}
int pthread_cond_signal(pthread_cond_t *c) {
    sync_event(SYNC_COND_SIGNAL, (uint64_t)(uintptr_t)c, 0);
    return get_pthread_cond_signal()(c);
}
int pthread_cond_broadcast(pthread_cond_t *c) {
    sync_event(SYNC_COND_SIGNAL, (uint64_t)(uintptr_t)c, 0);
    return get_pthread_cond_broadcast()(c);
}

/* A barrier's count, from its pthread_barrier_init (a small table: programs have few). */
#define BARRIERS 1024
static struct {
    void *b;
    unsigned count;
} barriers[BARRIERS];
static int barrier_spin;

int pthread_barrier_init(pthread_barrier_t *b, const pthread_barrierattr_t *a, unsigned count) {
    int r = get_pthread_barrier_init()(b, a, count);
    if (r == 0) {
        spin_lock(&barrier_spin);
        int free_slot = -1, i;
        for (i = 0; i < BARRIERS; i++) {
            if (barriers[i].b == b) break;
            if (free_slot < 0 && barriers[i].b == NULL) free_slot = i;
        }
        if (i == BARRIERS) i = free_slot;
        if (i >= 0) {
            barriers[i].b = b;
            barriers[i].count = count;
        }
        spin_unlock(&barrier_spin);
    }
    return r;
}
int pthread_barrier_wait(pthread_barrier_t *b) {
    unsigned count = 0;
    spin_lock(&barrier_spin);
    for (int i = 0; i < BARRIERS; i++) {
        if (barriers[i].b == b) {
            count = barriers[i].count;
            break;
        }
    }
    spin_unlock(&barrier_spin);
    sync_event(SYNC_BARRIER, (uint64_t)(uintptr_t)b, count);
    return get_pthread_barrier_wait()(b);
}

/* -- OpenMP (gcc's libgomp entry points) ------------------------------------------------------ */
extern int omp_get_num_threads(void) __attribute__((weak));
static uint64_t region_ids;
static __thread uint64_t cur_region;

struct region {
    void (*fn)(void *);
    void *data;
    uint64_t id;
};

static unsigned team_size(void) { return omp_get_num_threads ? (unsigned)omp_get_num_threads() : 1; }

/* For tierlab_kmp_rt.c, LLVM libomp's entry points: an event, and a new region's id. */
void tierlab_sync_event(uint32_t kind, uint64_t object, uint64_t arg) { sync_event(kind, object, arg); }
uint64_t tierlab_sync_region_id(void) { return __atomic_add_fetch(&region_ids, 1, __ATOMIC_RELAXED); }

/* Every team thread runs the region's body through this: the start (after the fork), the
 * body, and the implicit barrier at its end. */
static void region_body(void *p) {
    struct region *r = p;
    uint64_t outer = cur_region;
    cur_region = r->id;
    sync_event(SYNC_OMP_START, r->id, 0);
    r->fn(r->data);
    sync_event(SYNC_OMP_BARRIER, r->id, team_size());
    cur_region = outer;
}

static struct region fork_region(void (*fn)(void *), void *data) {
    struct region r = {fn, data, __atomic_add_fetch(&region_ids, 1, __ATOMIC_RELAXED)};
    sync_event(SYNC_OMP_FORK, r.id, 0);
    return r;
}

static void team_barrier(void) { sync_event(SYNC_OMP_BARRIER, cur_region, team_size()); }

typedef void (*omp_fn)(void *);
REAL(void, GOMP_parallel, NULL, (omp_fn, void *, unsigned, unsigned))
void GOMP_parallel(omp_fn fn, void *data, unsigned n, unsigned flags) {
    struct region r = fork_region(fn, data);
    get_GOMP_parallel()(region_body, &r, n, flags);
}
#define PARALLEL_LOOP(name)                                                                          \
    REAL(void, name, NULL, (omp_fn, void *, unsigned, long, long, long, long, unsigned))              \
    void name(omp_fn fn, void *data, unsigned n, long start, long end, long incr, long chunk, unsigned flags) { \
        struct region r = fork_region(fn, data);                                                     \
        get_##name()(region_body, &r, n, start, end, incr, chunk, flags);                            \
    }
PARALLEL_LOOP(GOMP_parallel_loop_static)
PARALLEL_LOOP(GOMP_parallel_loop_dynamic)
PARALLEL_LOOP(GOMP_parallel_loop_guided)
PARALLEL_LOOP(GOMP_parallel_loop_nonmonotonic_dynamic)
PARALLEL_LOOP(GOMP_parallel_loop_nonmonotonic_guided)
#define PARALLEL_LOOP_RUNTIME(name)                                                                  \
    REAL(void, name, NULL, (omp_fn, void *, unsigned, long, long, long, unsigned))                    \
    void name(omp_fn fn, void *data, unsigned n, long start, long end, long incr, unsigned flags) {  \
        struct region r = fork_region(fn, data);                                                     \
        get_##name()(region_body, &r, n, start, end, incr, flags);                                   \
    }
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_runtime)
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_nonmonotonic_runtime)
PARALLEL_LOOP_RUNTIME(GOMP_parallel_loop_maybe_nonmonotonic_runtime)
REAL(void, GOMP_parallel_sections, NULL, (omp_fn, void *, unsigned, unsigned, unsigned))
void GOMP_parallel_sections(omp_fn fn, void *data, unsigned n, unsigned count, unsigned flags) {
    struct region r = fork_region(fn, data);
    get_GOMP_parallel_sections()(region_body, &r, n, count, flags);
}

REAL(void, GOMP_barrier, NULL, (void))
void GOMP_barrier(void) {
    team_barrier();
    get_GOMP_barrier()();
}
REAL(_Bool, GOMP_barrier_cancel, NULL, (void))
_Bool GOMP_barrier_cancel(void) {
    team_barrier();
    return get_GOMP_barrier_cancel()();
}
REAL(void, GOMP_loop_end, NULL, (void))
void GOMP_loop_end(void) {
    team_barrier();
    get_GOMP_loop_end()();
}
REAL(_Bool, GOMP_loop_end_cancel, NULL, (void))
_Bool GOMP_loop_end_cancel(void) {
    team_barrier();
    return get_GOMP_loop_end_cancel()();
}
REAL(void, GOMP_sections_end, NULL, (void))
void GOMP_sections_end(void) {
    team_barrier();
    get_GOMP_sections_end()();
}

/* Unnamed critical sections share one lock, atomic regions another (object 1 and 2); named
 * critical sections and omp locks are their address. */
REAL(void, GOMP_critical_start, NULL, (void))
void GOMP_critical_start(void) {
    get_GOMP_critical_start()();
    sync_event(SYNC_OMP_LOCK, 1, 0);
}
REAL(void, GOMP_critical_end, NULL, (void))
void GOMP_critical_end(void) {
    sync_event(SYNC_OMP_UNLOCK, 1, 0);
    get_GOMP_critical_end()();
}
REAL(void, GOMP_critical_name_start, NULL, (void **))
void GOMP_critical_name_start(void **p) {
    get_GOMP_critical_name_start()(p);
    sync_event(SYNC_OMP_LOCK, (uint64_t)(uintptr_t)p, 0);
}
REAL(void, GOMP_critical_name_end, NULL, (void **))
void GOMP_critical_name_end(void **p) {
    sync_event(SYNC_OMP_UNLOCK, (uint64_t)(uintptr_t)p, 0);
    get_GOMP_critical_name_end()(p);
}
REAL(void, GOMP_atomic_start, NULL, (void))
void GOMP_atomic_start(void) {
    get_GOMP_atomic_start()();
    sync_event(SYNC_OMP_LOCK, 2, 0);
}
REAL(void, GOMP_atomic_end, NULL, (void))
void GOMP_atomic_end(void) {
    sync_event(SYNC_OMP_UNLOCK, 2, 0);
    get_GOMP_atomic_end()();
}
/* libomp's omp_set_lock calls its __kmpc_set_lock, which tierlab_kmp_rt.c records when the
 * program calls it itself: not while inside omp_set_lock/omp_unset_lock (recorded here). */
__attribute__((visibility("hidden"))) __thread int tierlab_in_omp_lock;
REAL(void, omp_set_lock, "OMP_3.0", (void *))
void omp_set_lock(void *l) {
    tierlab_in_omp_lock++;
    get_omp_set_lock()(l);
    tierlab_in_omp_lock--;
    sync_event(SYNC_OMP_LOCK, (uint64_t)(uintptr_t)l, 0);
}
REAL(void, omp_unset_lock, "OMP_3.0", (void *))
void omp_unset_lock(void *l) {
    sync_event(SYNC_OMP_UNLOCK, (uint64_t)(uintptr_t)l, 0);
    tierlab_in_omp_lock++;
    get_omp_unset_lock()(l);
    tierlab_in_omp_lock--;
}

/* -- processes ------------------------------------------------------------------------------ */
/* The first traced process writes into $TIERLAB_TRACE_DIR itself and puts its pid and clock
 * origin into the environment (TIERLAB_TRACE_ROOT, TIERLAB_TRACE_T0); every later one (a
 * forked child, or a program exec'd with that environment) writes into p<PID> there, or
 * p<PID>-2, -3, ... when that exists (a process that execs another traced program). Each
 * appends one line to processes.log in the top directory when it starts:
 *   process <pid> <parent pid> <ns> <start|fork|exec> <directory> <executable>
 */
static char base_dir[3000];
static const char *proc_how = "start";

static int proc_dir_init(const char *base) {
    RT_BUSY();
    strcpy(base_dir, base);
    if (!getenv("TIERLAB_TRACE_ROOT")) {
        char v[32];
        snprintf(v, sizeof v, "%d", main_pid);
        setenv("TIERLAB_TRACE_ROOT", v, 1);
        snprintf(v, sizeof v, "%llu", (unsigned long long)t0);
        setenv("TIERLAB_TRACE_T0", v, 1);
        strcpy(dir, base);
        return 1;
    }
    if (strcmp(proc_how, "start") == 0) proc_how = "exec";
    for (int k = 1; k < 1000; k++) {
        if (k == 1)
            snprintf(dir, sizeof dir, "%s/p%d", base, (int)getpid());
        else
            snprintf(dir, sizeof dir, "%s/p%d-%d", base, (int)getpid(), k);
        if (mkdir(dir, 0755) == 0) return 1;
        if (errno != EEXIST) return 0;
    }
    return 0;
}

static void proc_log(const char *how) {
    RT_BUSY();
    char path[3100], exe[1024], line[4400];
    snprintf(path, sizeof path, "%s/processes.log", base_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    const char *rel = strcmp(dir, base_dir) == 0 ? "." : dir + strlen(base_dir) + 1;
    int k = snprintf(line, sizeof line, "process %d %d %llu %s %s %s\n", (int)getpid(), (int)getppid(),
                     (unsigned long long)rel_ns(), how, rel, exe);
    if (k > 0) write_all(fd, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1); /* one write: O_APPEND keeps lines whole */
    close(fd);
}

/* The allocation interposer linked beside this runtime (tierlab_alloc_rt.c) follows the
 * process through these handlers, after this runtime in the child (it writes its allocs.bin
 * into the child's directory): 0 before the fork, 1 in the parent, 2 in the child. */
void tierlab_alloc_fork(int phase) __attribute__((weak));

/* This process's directory of the recording (the top one, or p<PID>...), NULL when nothing is
 * recorded: for the allocation interposer. */
__attribute__((visibility("default"))) const char *tierlab_trace_proc_dir(void) {
    init();
    return enabled ? dir : NULL;
}

static void atfork_prepare(void) {
    real_mutex_lock(&lock);
    spin_lock(&sync_spin);
    if (tierlab_alloc_fork) tierlab_alloc_fork(0);
}

static void atfork_parent(void) {
    if (tierlab_alloc_fork) tierlab_alloc_fork(1);
    spin_unlock(&sync_spin);
    real_mutex_unlock(&lock);
}

/* The child of a fork: only the forking thread goes on; what the parent buffered stays the
 * parent's to write. The child starts its own files in a directory of its own. */
static void atfork_child(void) {
    RT_BUSY();
    spin_unlock(&sync_spin);
    real_mutex_unlock(&lock);
    sync_n = 0;
    main_pid = (int)getpid();
    all_bufs = NULL;
    if (maps_fd >= 0) close(maps_fd);
    if (sync_fd >= 0) close(sync_fd);
    maps_fd = sync_fd = -1;
    if (!proc_dir_init(base_dir)) {
        enabled = 0;
        if (tierlab_alloc_fork) tierlab_alloc_fork(2); /* it records nothing either */
        return;
    }
    char path[3100];
    snprintf(path, sizeof path, "%s/maps.log", dir);
    maps_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    snprintf(path, sizeof path, "%s/sync.bin", dir);
    sync_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    struct tbuf *b = cur;
    if (b && b != &discard_buf) {
        int on = b->win.on;
        close(b->fd);
        close(b->sfd);
        close(b->tfd);
        b->tid = (int)syscall(SYS_gettid);
        b->fd = open_out(b->tid, "bin");
        b->sfd = open_out(b->tid, "size");
        b->tfd = open_out(b->tid, "time");
        b->index = 0;
        b->pos = b->buf;
        b->lim = b->buf + CKPT;
        b->win = (struct twin){.on = on, .seg = b->pos}; /* its access count starts at 0 */
        b->next = NULL;
        all_bufs = b;
        checkpoint(b);
        if (__atomic_load_n(&win_active, __ATOMIC_RELAXED)) win_slow(b, 1);
        pthread_setspecific(key, b);
    }
    real_mutex_lock(&lock);
    log_line("start %d\n", main_pid);
    snapshot("fork");
    real_mutex_unlock(&lock);
    proc_how = "fork";
    proc_log("fork");
    if (tierlab_alloc_fork) tierlab_alloc_fork(2);
}

/* -- windows ---------------------------------------------------------------------------------- */
/* $TIERLAB_TRACE_WINDOW = START:LENGTH[:EVERY]: record window k (k = 0, 1, ...; only k = 0
 * without EVERY) over [START + k EVERY, START + k EVERY + LENGTH). The three are either times
 * since the first traced process started (a unit: ns, us, ms, s) or access counts of each
 * thread from its first access (no unit; k, M, G multiply by 10^3, 10^6, 10^9; the thread of a
 * forked child counts from 0). Access windows are exact for every thread; a time
 * window opens and closes within 4096 of a thread's accesses of its bounds (a thread reads the
 * clock at its buffer's checkpoints).
 * $TIERLAB_TRACE_ROI=1: record only between tierlab_trace_start() and tierlab_trace_stop()
 * (tierlab_trace.h), also within the window if both are given. The calling thread starts or
 * stops at the call; the program's other threads within 4096 of their accesses. */
static int win_kind; /* 0 none, 1 accesses, 2 ns */
static uint64_t win_start, win_len, win_every;
static int roi_on = 1;

static int parse_amount(const char *s, char **end, uint64_t *v, int *kind) {
    double x = strtod(s, end);
    if (*end == s || x < 0) return 0;
    const char *u = *end;
    static const struct {
        const char *name;
        double mul;
        int kind;
    } units[] = {{"ns", 1, 2}, {"us", 1e3, 2}, {"ms", 1e6, 2}, {"s", 1e9, 2}, {"k", 1e3, 1}, {"M", 1e6, 1},
                 {"G", 1e9, 1}, {"", 1, 1}};
    for (unsigned i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n = strlen(units[i].name);
        if (strncmp(u, units[i].name, n) == 0 && (u[n] == 0 || u[n] == ':')) {
            *v = (uint64_t)(x * units[i].mul + 0.5);
            *kind = units[i].kind;
            *end = (char *)u + n;
            return 1;
        }
    }
    return 0;
}

static void win_init(void) {
    const char *roi = getenv("TIERLAB_TRACE_ROI");
    if (roi && *roi && strcmp(roi, "0") != 0) {
        roi_on = 0;
        win_active = 1;
    }
    const char *w = getenv("TIERLAB_TRACE_WINDOW");
    if (!w || !*w) return;
    uint64_t v[3] = {0, 0, 0};
    int kinds[3] = {0, 0, 0}, n = 0;
    const char *p = w;
    while (n < 3) {
        char *end;
        if (!parse_amount(p, &end, &v[n], &kinds[n])) break;
        n++;
        if (*end != ':') {
            p = end;
            break;
        }
        p = end + 1;
    }
    if (n < 2 || *p || kinds[0] != kinds[1] || (n == 3 && kinds[2] != kinds[0]) || v[1] == 0 ||
        (n == 3 && v[2] < v[1])) {
        static const char msg[] =
            "tierlab trace runtime: TIERLAB_TRACE_WINDOW is START:LENGTH[:EVERY] (accesses, or times "
            "with ns/us/ms/s; LENGTH > 0, EVERY >= LENGTH): tracing the whole program\n";
        write_all(2, msg, sizeof msg - 1);
        return;
    }
    win_kind = kinds[0];
    win_start = v[0];
    win_len = v[1];
    win_every = n == 3 ? v[2] : 0;
    win_active = 1;
}

/* Whether position x (accesses or ns) is inside a window, and the next position where that
 * changes (UINT64_MAX: never). */
static int win_inside(uint64_t x, uint64_t *next) {
    if (x < win_start) {
        *next = win_start;
        return 0;
    }
    if (win_every == 0) {
        int in = x - win_start < win_len;
        *next = in ? win_start + win_len : UINT64_MAX;
        return in;
    }
    uint64_t base = win_start + (x - win_start) / win_every * win_every;
    if (x - base < win_len) {
        *next = base + win_len;
        return 1;
    }
    *next = base + win_every;
    return 0;
}

/* The slow path of a thread while windows or the region-of-interest API are in use (`fresh`:
 * its buffer was just made). Outside a window the buffer is scratch: accesses are counted,
 * not kept. */
static struct tbuf *win_slow(struct tbuf *b, int fresh) {
    struct twin *w = &b->win;
    if (!fresh && w->seg >= b->buf && w->seg <= b->pos) w->seen += (uint64_t)(b->pos - w->seg);
    uint64_t t = rel_ns(), next_acc = UINT64_MAX, next_t;
    int want = __atomic_load_n(&roi_on, __ATOMIC_RELAXED);
    if (win_kind == 1) want &= win_inside(w->seen, &next_acc);
    if (win_kind == 2) want &= win_inside(t, &next_t);
    if (w->on && !want) {
        uint64_t idx = rec_index(b);
        if (idx > 0) checkpoint_at(b, idx - 1, t);
        flush_buf(b);
        w->on = 0;
    } else if (!w->on && want) {
        b->pos = b->buf;
        w->on = 1;
        checkpoint_at(b, b->index, t);
    } else if (w->on && !fresh) {
        if (b->pos == b->end) {
            flush_buf(b);
            if (t - last_snap >= SNAP_NS && real_mutex_trylock(&lock) == 0) {
                if (t - last_snap >= SNAP_NS) snapshot("flush");
                real_mutex_unlock(&lock);
            }
        }
        checkpoint_at(b, rec_index(b), t);
    }
    if (!w->on) b->pos = b->buf;
    uint64_t room = CKPT;
    if (next_acc - w->seen < room) room = next_acc - w->seen;
    if (w->on && (uint64_t)(b->end - b->pos) < room) room = (uint64_t)(b->end - b->pos);
    w->seg = b->pos;
    b->lim = b->pos + room;
    return b;
}

/* -- the region-of-interest API (tierlab_trace.h) ------------------------------------------- */
void tierlab_trace_start(void) {
    __atomic_store_n(&roi_on, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&win_active, 1, __ATOMIC_RELAXED);
    struct tbuf *b = cur;
    if (enabled && b && b != &discard_buf && getpid() == main_pid) win_slow(b, 0);
}

void tierlab_trace_stop(void) {
    __atomic_store_n(&roi_on, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&win_active, 1, __ATOMIC_RELAXED);
    struct tbuf *b = cur;
    if (enabled && b && b != &discard_buf && getpid() == main_pid) win_slow(b, 0);
}

/* -- exec and _exit --------------------------------------------------------------------------- */
/* A process that execs or leaves by _exit runs no atexit handler: its buffers are written
 * before (an exec that fails goes on tracing into the same files). */
void tierlab_alloc_leaving(void) __attribute__((weak)); /* the allocation interposer's */
static void flush_before_leaving(void) {
    RT_BUSY();
    if (enabled && getpid() == main_pid) at_exit_flush();
    if (tierlab_alloc_leaving) tierlab_alloc_leaving();
}

REAL(int, execve, NULL, (const char *, char *const[], char *const[]))
int execve(const char *path, char *const argv[], char *const envp[]) {
    flush_before_leaving();
    return get_execve()(path, argv, envp);
}
REAL(int, execv, NULL, (const char *, char *const[]))
int execv(const char *path, char *const argv[]) {
    flush_before_leaving();
    return get_execv()(path, argv);
}
REAL(int, execvp, NULL, (const char *, char *const[]))
int execvp(const char *file, char *const argv[]) {
    flush_before_leaving();
    return get_execvp()(file, argv);
}
REAL(int, execvpe, NULL, (const char *, char *const[], char *const[]))
int execvpe(const char *file, char *const argv[], char *const envp[]) {
    flush_before_leaving();
    return get_execvpe()(file, argv, envp);
}

/* execl, execlp, execle: their arguments into an argv (at most 4096). */
#define EXECL_ARGV(first, ap, argv)                                      \
    char *argv[4097];                                                   \
    int argc_ = 0;                                                      \
    argv[argc_++] = (char *)(first);                                    \
    while (argc_ < 4096 && (argv[argc_] = va_arg(ap, char *))) argc_++; \
    argv[argc_] = NULL

int execl(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    EXECL_ARGV(arg, ap, argv);
    va_end(ap);
    return execv(path, argv);
}
int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    EXECL_ARGV(arg, ap, argv);
    va_end(ap);
    return execvp(file, argv);
}
int execle(const char *path, const char *arg, ...) {
    va_list ap;
    va_start(ap, arg);
    EXECL_ARGV(arg, ap, argv);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

void _exit(int status) {
    flush_before_leaving();
    for (;;) syscall(SYS_exit_group, status);
}
void _Exit(int status) __attribute__((alias("_exit")));
