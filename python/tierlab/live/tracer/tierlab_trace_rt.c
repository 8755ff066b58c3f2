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
 *                GOMP_sections_end, GOMP_critical*, GOMP_atomic*, omp_set/unset_lock) and
 *                pthread's barriers, mutexes and condition variables
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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BUF_RECS (1u << 16) /* accesses per flush */
#define CKPT 4096u          /* accesses per time checkpoint (divides BUF_RECS) */
#define SNAP_NS 10000000ull /* at most one maps snapshot per 10 ms */
#define STORE (1ull << 63)

struct tbuf {
    uint64_t *pos, *lim, *end, *buf;
    uint8_t *sz;
    uint64_t index; /* accesses written before buf[0] */
    int fd, sfd, tfd, tid;
    struct tbuf *next;
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

static void checkpoint(struct tbuf *b) {
    uint64_t pair[2] = {b->index + (uint64_t)(b->pos - b->buf), rel_ns()};
    write_all(b->tfd, pair, sizeof pair);
}

static void flush_buf(struct tbuf *b) {
    size_t n = (size_t)(b->pos - b->buf);
    if (n && b->fd >= 0) {
        write_all(b->fd, b->buf, n * 8);
        write_all(b->sfd, b->sz, n);
    }
    b->index += n;
    b->pos = b->buf;
    b->lim = b->buf + CKPT;
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

/* Called when the buffer reaches its next checkpoint (or on a thread's first access). */
static __attribute__((noinline)) struct tbuf *slow(void) {
    struct tbuf *b = cur;
    if (b == NULL || (b != &discard_buf && getpid() != main_pid)) {
        b = cur = new_buf();
        if (b != &discard_buf) checkpoint(b);
        return b;
    }
    if (b == &discard_buf) {
        b->pos = b->buf;
        b->lim = b->buf + CKPT;
        return b;
    }
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

static void init(void) {
    static int done;
    if (done) return;
    done = 1;
    t0 = now_ns();
    main_pid = (int)getpid();
    discard_buf.buf = raw_mmap(CKPT * 9 + 64);
    discard_buf.sz = (uint8_t *)(discard_buf.buf + CKPT);
    discard_buf.end = discard_buf.buf + CKPT;
    discard_buf.fd = -1;
    pthread_key_create(&key, thread_done);
    const char *d = getenv("TIERLAB_TRACE_DIR");
    if (d && *d && strlen(d) < sizeof dir) {
        strcpy(dir, d);
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
    return b->index + (uint64_t)(b->pos - b->buf);
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
int tierlab_trace_active(void) { return enabled; }
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
REAL(void, omp_set_lock, "OMP_3.0", (void *))
void omp_set_lock(void *l) {
    get_omp_set_lock()(l);
    sync_event(SYNC_OMP_LOCK, (uint64_t)(uintptr_t)l, 0);
}
REAL(void, omp_unset_lock, "OMP_3.0", (void *))
void omp_unset_lock(void *l) {
    sync_event(SYNC_OMP_UNLOCK, (uint64_t)(uintptr_t)l, 0);
    get_omp_unset_lock()(l);
}
