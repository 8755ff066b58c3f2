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
 *
 * A read-modify-write atomic is a load and a store (as lackey's "modify"); a range access
 * (struct copies, memcpy/memset the compiler expands) is one access per 8 bytes.
 * Without $TIERLAB_TRACE_DIR the program runs and nothing is written.
 * Written for tierlab (MIT licence). Build: cc -O2 -fPIC -c tierlab_trace_rt.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
static int enabled, main_pid, maps_fd = -1;
static uint64_t t0, last_snap;
static char snapbuf[1 << 20];

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
    pthread_mutex_lock(&lock);
    flush_buf(b);
    pthread_mutex_unlock(&lock);
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
    pthread_mutex_lock(&lock);
    b->next = all_bufs;
    all_bufs = b;
    if (b->tid != main_pid) {
        char why[64];
        snprintf(why, sizeof why, "thread %d", b->tid);
        snapshot(why);
    }
    pthread_mutex_unlock(&lock);
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
        if (t - last_snap >= SNAP_NS && pthread_mutex_trylock(&lock) == 0) {
            if (t - last_snap >= SNAP_NS) snapshot("flush");
            pthread_mutex_unlock(&lock);
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

static void at_exit_flush(void) {
    if (!enabled || getpid() != main_pid) return;
    pthread_mutex_lock(&lock);
    for (struct tbuf *b = all_bufs; b; b = b->next) {
        flush_buf(b);
        checkpoint(b);
    }
    snapshot("exit");
    log_line("exit %llu\n", (unsigned long long)rel_ns());
    pthread_mutex_unlock(&lock);
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
    }
    if (enabled) {
        pthread_mutex_lock(&lock);
        log_line("start %d\n", main_pid);
        snapshot("start");
        pthread_mutex_unlock(&lock);
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
        pthread_mutex_lock(&lock);
        log_line("map %llu %llx %llx %s\n", (unsigned long long)rel_ns(), (unsigned long long)(uintptr_t)p,
                 (unsigned long long)len, fd >= 0 ? "[file]" : "[anon]");
        pthread_mutex_unlock(&lock);
    }
    return p;
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

int munmap(void *addr, size_t len) {
    int r = (int)syscall(SYS_munmap, addr, len);
    if (enabled && r == 0 && getpid() == main_pid) {
        pthread_mutex_lock(&lock);
        log_line("unmap %llu %llx %llx\n", (unsigned long long)rel_ns(), (unsigned long long)(uintptr_t)addr,
                 (unsigned long long)len);
        pthread_mutex_unlock(&lock);
    }
    return r;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    void *new_addr = va_arg(ap, void *);
    va_end(ap);
    void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
    if (enabled && p != MAP_FAILED && getpid() == main_pid) {
        pthread_mutex_lock(&lock);
        uint64_t t = rel_ns();
        log_line("unmap %llu %llx %llx\n", (unsigned long long)t, (unsigned long long)(uintptr_t)old,
                 (unsigned long long)old_len);
        log_line("map %llu %llx %llx [anon]\n", (unsigned long long)t, (unsigned long long)(uintptr_t)p,
                 (unsigned long long)new_len);
        pthread_mutex_unlock(&lock);
    }
    return p;
}
