/* tierlab's tracing runtime, the synchronisation of programs built with clang (or icx) and
 * LLVM's OpenMP runtime, libomp: linked beside tierlab_trace_rt.c into every traced program.
 * clang compiles OpenMP constructs into calls of libomp's __kmpc_* entry points; this file
 * defines those the program's synchronisation goes through, records the event in sync.bin
 * (through tierlab_trace_rt.c's tierlab_sync_event, the same kinds and columns as for gcc's
 * libgomp) and calls libomp's own (dlsym RTLD_NEXT). Without libomp in the program nothing
 * here is called.
 *
 *   __kmpc_fork_call       the encountering thread forks a region (omp-fork); every team
 *                          thread starts its body (omp-start) and reaches the implicit
 *                          barrier at the region's end (omp-barrier)
 *   __kmpc_barrier         an explicit barrier, and the implicit barrier that clang emits
 *                          at the end of a worksharing loop, sections or single construct
 *                          without nowait (omp-barrier)
 *   __kmpc_critical(_with_hint) / __kmpc_end_critical    omp-lock / omp-unlock of the
 *                          critical section's name (its kmp_critical_name's address)
 *   __kmpc_set_lock / __kmpc_unset_lock    omp-lock / omp-unlock of the lock when the
 *                          program calls them (omp_set_lock and omp_unset_lock, which call
 *                          them inside libomp, are recorded by tierlab_trace_rt.c)
 *   __kmpc_reduce / __kmpc_end_reduce      a reduction with a barrier: every team thread
 *                          arrives at one omp-barrier (a thread that combines under the
 *                          reduction's lock: omp-lock, then omp-unlock and the barrier at
 *                          __kmpc_end_reduce; one that does not: at __kmpc_reduce's return)
 *   __kmpc_reduce_nowait / __kmpc_end_reduce_nowait   omp-lock / omp-unlock of the
 *                          reduction's lock by a thread that combines under it
 *
 * Not synchronisation, so not recorded: __kmpc_single / __kmpc_end_single (which thread
 * runs the block; the barrier after it is a __kmpc_barrier call), __kmpc_for_static_init /
 * __kmpc_for_static_fini and the dispatch calls (the iterations a thread gets; the loop's
 * barrier is a __kmpc_barrier call), __kmpc_master / __kmpc_masked.
 * Written for tierlab (MIT licence). Build: cc -O2 -fPIC -c tierlab_kmp_rt.c
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <unistd.h>

/* From tierlab_trace_rt.c (same kinds as its SYNC_* enum and tierlab-core's `sync.kind`). */
void tierlab_sync_event(uint32_t kind, uint64_t object, uint64_t arg);
uint64_t tierlab_sync_region_id(void);
extern __thread int tierlab_in_omp_lock __attribute__((visibility("hidden"))); /* inside omp_set_lock / omp_unset_lock */
void tierlab_alloc_quiet(int delta) __attribute__((weak));
enum { K_OMP_BARRIER = 1, K_OMP_FORK = 6, K_OMP_START = 7, K_OMP_LOCK = 8, K_OMP_UNLOCK = 9 };

extern int omp_get_num_threads(void) __attribute__((weak));
static unsigned team_size(void) { return omp_get_num_threads ? (unsigned)omp_get_num_threads() : 1; }

/* libomp's definition of `name`, looked up once. */
static void *kmp_sym(const char *name) {
    if (tierlab_alloc_quiet) tierlab_alloc_quiet(1);
    void *p = dlsym(RTLD_NEXT, name);
    if (tierlab_alloc_quiet) tierlab_alloc_quiet(-1);
    if (!p) {
        static const char msg[] = "tierlab trace runtime: a libomp entry point it interposes was not found\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(127);
    }
    return p;
}
#define KMP(ret, name, params)                                              \
    static ret(*real_##name) params;                                        \
    static inline ret(*get_##name(void)) params {                           \
        if (!real_##name) real_##name = (ret(*) params)kmp_sym(#name);      \
        return real_##name;                                                 \
    }

typedef void ident; /* libomp's ident_t: passed through untouched */
typedef void (*kmpc_micro)(int *, int *, ...);

static __thread uint64_t cur_region;
/* The lock a thread holds from __kmpc_reduce(_nowait) to __kmpc_end_reduce(_nowait), if it
 * combines under one (0: none). */
static __thread uint64_t reduce_lock;

/* -- parallel regions --------------------------------------------------------------------- */
/* A region's outlined body takes (gtid, btid, argc pointers). libomp's own
 * __kmp_invoke_microtask calls a body with any number of pointers; the region runs each
 * team thread through kmp_body, which records its start and its implicit end barrier. */
struct kregion {
    kmpc_micro fn;
    int argc;
    void **argv;
    uint64_t id;
};
KMP(int, __kmp_invoke_microtask, (kmpc_micro, int, int, int, void **, void **))

static void kmp_body(int *gtid, int *btid, struct kregion *r) {
    uint64_t outer = cur_region;
    cur_region = r->id;
    tierlab_sync_event(K_OMP_START, r->id, 0);
    void *exit_frame = 0;
    get___kmp_invoke_microtask()(r->fn, *gtid, *btid, r->argc, r->argv, &exit_frame);
    tierlab_sync_event(K_OMP_BARRIER, r->id, team_size());
    cur_region = outer;
}

KMP(void, __kmpc_fork_call, (ident *, int, kmpc_micro, ...))
void __kmpc_fork_call(ident *loc, int argc, kmpc_micro fn, ...) {
    void *argv[argc > 0 ? argc : 1];
    va_list ap;
    va_start(ap, fn);
    for (int i = 0; i < argc; i++) argv[i] = va_arg(ap, void *);
    va_end(ap);
    struct kregion r = {fn, argc, argv, tierlab_sync_region_id()};
    tierlab_sync_event(K_OMP_FORK, r.id, 0);
    get___kmpc_fork_call()(loc, 1, (kmpc_micro)kmp_body, &r);
}

/* -- barriers ------------------------------------------------------------------------------ */
static void team_barrier(void) { tierlab_sync_event(K_OMP_BARRIER, cur_region, team_size()); }

KMP(void, __kmpc_barrier, (ident *, int))
void __kmpc_barrier(ident *loc, int gtid) {
    team_barrier();
    get___kmpc_barrier()(loc, gtid);
}

/* -- critical sections and locks ----------------------------------------------------------- */
KMP(void, __kmpc_critical, (ident *, int, void *))
void __kmpc_critical(ident *loc, int gtid, void *name) {
    get___kmpc_critical()(loc, gtid, name);
    tierlab_sync_event(K_OMP_LOCK, (uint64_t)(uintptr_t)name, 0);
}
KMP(void, __kmpc_critical_with_hint, (ident *, int, void *, uint32_t))
void __kmpc_critical_with_hint(ident *loc, int gtid, void *name, uint32_t hint) {
    get___kmpc_critical_with_hint()(loc, gtid, name, hint);
    tierlab_sync_event(K_OMP_LOCK, (uint64_t)(uintptr_t)name, 0);
}
KMP(void, __kmpc_end_critical, (ident *, int, void *))
void __kmpc_end_critical(ident *loc, int gtid, void *name) {
    tierlab_sync_event(K_OMP_UNLOCK, (uint64_t)(uintptr_t)name, 0);
    get___kmpc_end_critical()(loc, gtid, name);
}
KMP(void, __kmpc_set_lock, (ident *, int, void **))
void __kmpc_set_lock(ident *loc, int gtid, void **lock) {
    get___kmpc_set_lock()(loc, gtid, lock);
    if (!tierlab_in_omp_lock) tierlab_sync_event(K_OMP_LOCK, (uint64_t)(uintptr_t)lock, 0);
}
KMP(void, __kmpc_unset_lock, (ident *, int, void **))
void __kmpc_unset_lock(ident *loc, int gtid, void **lock) {
    if (!tierlab_in_omp_lock) tierlab_sync_event(K_OMP_UNLOCK, (uint64_t)(uintptr_t)lock, 0);
    get___kmpc_unset_lock()(loc, gtid, lock);
}

/* -- reductions ----------------------------------------------------------------------------- */
/* __kmpc_reduce* returns 1 to a thread that combines its partial result and then calls
 * __kmpc_end_reduce*: under the reduction's lock (the critical method) or as the team's
 * combiner (the tree method: a lock only it takes); 2 to one that combines with atomics and
 * then calls __kmpc_end_reduce* (the blocking form); 0 to one with nothing more to do. */
typedef void (*reduce_fn)(void *, void *);
KMP(int, __kmpc_reduce, (ident *, int, int, size_t, void *, reduce_fn, void *))
int __kmpc_reduce(ident *loc, int gtid, int nvars, size_t size, void *data, reduce_fn fn, void *lck) {
    int ret = get___kmpc_reduce()(loc, gtid, nvars, size, data, fn, lck);
    if (ret == 1) {
        reduce_lock = (uint64_t)(uintptr_t)lck;
        tierlab_sync_event(K_OMP_LOCK, reduce_lock, 0);
    } else if (ret == 0) {
        team_barrier();
    }
    return ret;
}
KMP(void, __kmpc_end_reduce, (ident *, int, void *))
void __kmpc_end_reduce(ident *loc, int gtid, void *lck) {
    if (reduce_lock) tierlab_sync_event(K_OMP_UNLOCK, reduce_lock, 0);
    reduce_lock = 0;
    team_barrier();
    get___kmpc_end_reduce()(loc, gtid, lck);
}
KMP(int, __kmpc_reduce_nowait, (ident *, int, int, size_t, void *, reduce_fn, void *))
int __kmpc_reduce_nowait(ident *loc, int gtid, int nvars, size_t size, void *data, reduce_fn fn, void *lck) {
    int ret = get___kmpc_reduce_nowait()(loc, gtid, nvars, size, data, fn, lck);
    if (ret == 1) {
        reduce_lock = (uint64_t)(uintptr_t)lck;
        tierlab_sync_event(K_OMP_LOCK, reduce_lock, 0);
    }
    return ret;
}
KMP(void, __kmpc_end_reduce_nowait, (ident *, int, void *))
void __kmpc_end_reduce_nowait(ident *loc, int gtid, void *lck) {
    if (reduce_lock) tierlab_sync_event(K_OMP_UNLOCK, reduce_lock, 0);
    reduce_lock = 0;
    get___kmpc_end_reduce_nowait()(loc, gtid, lck);
}
