//! The live recorder (Linux): launch or attach, open the events, drain the ring buffers,
//! track mappings, and hand back batches of rows for the recording format.
//!
//! Design:
//! - One ring buffer per online CPU. On each CPU, one sampling event per thread present at the
//!   start (one thread for a launched command) with `inherit` + `inherit_thread`, so the
//!   kernel itself follows every thread the target creates from its first instruction; the
//!   events of a CPU share its ring (`PERF_EVENT_IOC_SET_OUTPUT`). Samples carry the thread id.
//! - A launched command is forked, waits on a pipe until the events are open on it
//!   (`enable_on_exec`), then execs: nothing it does after `exec` is missed.
//! - The wake-up watermark is `--buffer-size` bytes (the PEBS buffer's interrupt threshold);
//!   the ring holds at least twice that and at least 512 KiB, and a thread of its own drains
//!   it ([`Background`]), so records keep landing while a drain runs and while the owner
//!   writes. A drain is one read of one CPU's ring; every sample names the drain that
//!   delivered it.
//! - Mapping history: perf `MMAP2` records plus `/proc/PID/maps` snapshots at every drain and
//!   at least every `snapshot_interval_ns` (see `crate::maps` for what that guarantees).
//! - Nothing is done to the target itself (no ptrace, no seccomp, no preload): if the recorder
//!   dies its events close and the target runs on unaffected.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{CString, OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use tierlab_core::{Drain, MappingEvent, Sample, PAGE_SIZE};

use crate::config::{ConfigError, RecorderConfig};
use crate::events::{Backend, BackendChoice, EventError, EventSpec, Pmus, SAMPLER_FLAGS};
use crate::maps::{self, Tracker};
use crate::perf::{flag, mmap_page, sample, PerfEventAttr};
use crate::ring::{self, Record};

/// Why recording could not start or go on.
#[derive(Debug)]
pub enum LiveError {
    /// A configuration value the recorder cannot take.
    Config(ConfigError),
    Event(EventError),
    /// A system call failed: what was being done, and the OS error.
    Os {
        what: String,
        err: std::io::Error,
    },
    Usage(String),
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiveError::Config(e) => write!(f, "{e}"),
            LiveError::Event(e) => write!(f, "{e}"),
            LiveError::Os { what, err } => write!(f, "{what}: {err}"),
            LiveError::Usage(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LiveError {}

impl From<ConfigError> for LiveError {
    fn from(e: ConfigError) -> Self {
        LiveError::Config(e)
    }
}

impl From<EventError> for LiveError {
    fn from(e: EventError) -> Self {
        LiveError::Event(e)
    }
}

fn os_err(what: impl Into<String>) -> LiveError {
    LiveError::Os { what: what.into(), err: std::io::Error::last_os_error() }
}

/// Rows produced by one poll for the recording's tables, as core's row types: times in ns
/// from the start of the recording.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    /// Rows of `samples` (`event` is the recording's event name).
    pub samples: Vec<Sample>,
    /// Rows of `drains`.
    pub drains: Vec<Drain>,
    /// Rows of `mappings`.
    pub mappings: Vec<MappingEvent>,
    /// Page sizes of mappings with huge pages (from `/proc/PID/smaps`).
    pub page_sizes: Vec<maps::PageSizes>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
            && self.drains.is_empty()
            && self.mappings.is_empty()
            && self.page_sizes.is_empty()
    }
}

/// Accounting of a recording.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub samples: u64,
    /// LOST records, and the records they say were dropped (ring full).
    pub lost_records: u64,
    pub lost: u64,
    /// Samples the PMU itself dropped (LOST_SAMPLES).
    pub lost_samples: u64,
    pub throttled: u64,
    pub unthrottled: u64,
    pub drains: u64,
    /// Drains triggered by the watermark vs by the flush timer / the end.
    pub watermark_drains: u64,
    pub timer_drains: u64,
    /// Samples without a data address (IBS ops that were not loads/stores).
    pub samples_without_addr: u64,
    /// Samples of other processes (only when the kernel lacks `inherit_thread`).
    pub other_process_samples: u64,
    pub corrupt_rings: u64,
    pub unparsed_records: u64,
    pub snapshots: u64,
    pub max_snapshot_gap_ns: u64,
    pub threads: u64,
    /// Snapshots that read `/proc/PID/smaps` (page sizes) rather than `maps`.
    pub smaps_reads: u64,
}

#[allow(dead_code)] // `fd` documents which event owns the ring.
struct Ring {
    cpu: u32,
    fd: i32,
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    last_drain_ns: u64,
    /// The owning event's task exited: the fd reports POLLHUP from now on.
    hup: bool,
    /// Side-band records (mmap, comm) up to this position were fed to the mapping tracker
    /// ahead of their drain ([`Recorder::feed_sideband`]).
    sideband_pos: u64,
}

impl Ring {
    fn head(&self) -> u64 {
        // SAFETY: `base` maps the control page for the ring's lifetime; data_head is written by
        // the kernel, read with an acquire fence after the load as the ABI requires.
        let v = unsafe { std::ptr::read_volatile(self.base.add(mmap_page::DATA_HEAD) as *const u64) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        v
    }
    fn tail(&self) -> u64 {
        // SAFETY: as above; only this process writes data_tail.
        unsafe { std::ptr::read_volatile(self.base.add(mmap_page::DATA_TAIL) as *const u64) }
    }
    fn set_tail(&self, tail: u64) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.base.add(mmap_page::DATA_TAIL) as *mut u64, tail) }
    }
    fn data(&self) -> &[u8] {
        // SAFETY: the data area lies within the mapping and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) }
    }
}

// SAFETY: the mapping is process-wide and owned by the ring; moving the owner to another
// thread (the binding releases the GIL while polling) does not change who may touch it.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping what `open_ring` mapped, once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.map_len);
        }
    }
}

/// How the target ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Running,
    /// Exited with this status (launched commands).
    Code(i32),
    /// Killed by this signal (launched commands).
    Signal(i32),
    /// Gone (attached processes: the status belongs to their parent).
    Gone,
}

/// A recording in progress.
pub struct Recorder {
    cfg: RecorderConfig,
    pub spec: EventSpec,
    /// Why `auto` did not pick the backends before the chosen one.
    pub auto_notes: Vec<String>,
    pub pid: i32,
    pub launched: bool,
    pidfd: i32,
    fds: Vec<i32>,
    rings: Vec<Ring>,
    id_types: HashMap<u64, u64>,
    /// Kernel lacks `inherit_thread`, or events are CPU-wide: samples of other processes
    /// arrive and must be dropped.
    filter_pid: bool,
    /// One event per CPU for every process (IBS PMUs that refuse per-task events).
    cpu_wide: bool,
    t0: u64,
    tracker: Tracker,
    last_snapshot_ns: u64,
    last_smaps_ns: Option<u64>,
    /// How long the last `/proc/PID/smaps` read took (it walks the page tables).
    smaps_cost_ns: u64,
    pub stats: Stats,
    tids: BTreeSet<u32>,
    next_drain: u64,
    exit: Exit,
    scratch: Vec<u8>,
    pending: Batch,
    pub flags_dropped: Vec<String>,
}

/// The smallest ring: 512 KiB (plus the control page: the 516 KiB per CPU that
/// `kernel.perf_event_mlock_kb` grants every user by default), so a burst of records while
/// the drain thread is descheduled is absorbed rather than lost.
pub const MIN_RING_BYTES: u64 = 512 << 10;

/// Shortest time between two reads of `/proc/PID/smaps`.
pub const SMAPS_INTERVAL_NS: u64 = 100_000_000;

/// Sample type bits of the `sample_id_all` trailer every event of a ring shares.
const ID_TYPE: u64 = sample::TID | sample::TIME | sample::CPU | sample::IDENTIFIER;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Online CPUs, from `/sys/devices/system/cpu/online` (`0-3,6`).
pub fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = parse_cpu_list(text.trim());
    if cpus.is_empty() {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
        cpus = (0..n).collect();
    }
    cpus
}

pub fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    cpus.push(a);
                }
            }
        }
    }
    cpus
}

fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or("?".into())
}

fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32, group: i32) -> Result<i32, std::io::Error> {
    // SAFETY: the attribute is a valid, fully initialised perf_event_attr of the size it says.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid,
            cpu,
            group,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(fd as i32)
    }
}

/// `PERF_FLAG_FD_CLOEXEC`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

// ioctl numbers (`_IO('$', n)`, `_IOR('$', 7, u64)`).
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const IOC_ID: libc::c_ulong = 0x8008_2407;

fn ioctl(fd: i32, req: libc::c_ulong, arg: libc::c_ulong) -> Result<(), std::io::Error> {
    // SAFETY: perf ioctls on a perf fd; ID writes one u64 to the pointer passed as `arg`.
    if unsafe { libc::ioctl(fd, req as _, arg) } < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn event_id(fd: i32) -> Result<u64, std::io::Error> {
    let mut id: u64 = 0;
    ioctl(fd, IOC_ID, &mut id as *mut u64 as libc::c_ulong)?;
    Ok(id)
}

fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: closing a descriptor this recorder opened.
        unsafe { libc::close(fd) };
    }
}

/// Resolve a command name like `execvp` does (a name with `/` is used as is).
pub fn resolve_command(cmd: &OsStr) -> Result<PathBuf, LiveError> {
    let display = cmd.to_string_lossy();
    if cmd.is_empty() {
        return Err(LiveError::Usage("no command given".into()));
    }
    let is_exec = |p: &Path| {
        let Ok(c) = CString::new(p.as_os_str().as_bytes()) else { return false };
        // SAFETY: access() on a NUL-terminated path.
        p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
    };
    if cmd.as_bytes().contains(&b'/') {
        let p = PathBuf::from(cmd);
        if !p.exists() {
            return Err(LiveError::Usage(format!("{display}: no such file")));
        }
        if !is_exec(&p) {
            return Err(LiveError::Usage(format!("{display}: not an executable file")));
        }
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let p = dir.join(cmd);
        if is_exec(&p) {
            return Ok(p);
        }
    }
    Err(LiveError::Usage(format!("{display}: command not found")))
}

impl Recorder {
    fn encode(cfg: &RecorderConfig) -> Result<(EventSpec, Vec<String>), LiveError> {
        cfg.validate()?;
        let pmus = match &cfg.pmus_root {
            Some(root) => Pmus::at(root),
            None => Pmus::system(),
        };
        let (backend, notes) = match cfg.backend {
            BackendChoice::Use(b) => (b, Vec::new()),
            BackendChoice::Auto => pmus.auto(),
        };
        let spec = pmus.event(backend, cfg.event.as_deref(), cfg.period, cfg.ldlat, cfg.l3_miss_only)?;
        Ok((spec, notes))
    }

    fn new(cfg: RecorderConfig, spec: EventSpec, notes: Vec<String>, pid: i32, launched: bool) -> Self {
        let min = cfg.min_mapping;
        Recorder {
            cfg,
            spec,
            auto_notes: notes,
            pid,
            launched,
            pidfd: -1,
            fds: Vec::new(),
            rings: Vec::new(),
            id_types: HashMap::new(),
            filter_pid: false,
            cpu_wide: false,
            t0: 0,
            tracker: Tracker::new(min),
            last_snapshot_ns: 0,
            last_smaps_ns: None,
            smaps_cost_ns: 0,
            stats: Stats::default(),
            tids: BTreeSet::new(),
            next_drain: 0,
            exit: Exit::Running,
            scratch: Vec::new(),
            pending: Batch::default(),
            flags_dropped: Vec::new(),
        }
    }

    /// Bytes of the ring's data area for a buffer size (a power of two of pages, at least
    /// twice the watermark). Pages are 4 KiB base pages (core's [`PAGE_SIZE`]), the page size
    /// of every machine the recorder targets (x86-64; aarch64 and riscv64 with 4 KiB pages).
    pub fn ring_data_size(buffer_size: u64) -> usize {
        let bytes = (2 * buffer_size.max(1)).max(MIN_RING_BYTES);
        let pages = bytes.div_ceil(PAGE_SIZE).max(1).next_power_of_two();
        (pages * PAGE_SIZE) as usize
    }

    fn sampler_attr(&self, enable_on_exec: bool) -> PerfEventAttr {
        let mut a = self.spec.attr;
        a.flags |= SAMPLER_FLAGS
            | flag::DISABLED
            | flag::INHERIT
            | flag::INHERIT_THREAD
            | flag::WATERMARK
            | flag::MMAP
            | flag::MMAP2
            | flag::MMAP_DATA
            | flag::COMM
            | flag::COMM_EXEC
            | flag::TASK
            | flag::USE_CLOCKID;
        if enable_on_exec {
            a.flags |= flag::ENABLE_ON_EXEC;
        }
        a.clockid = libc::CLOCK_MONOTONIC;
        a.wakeup = self.cfg.buffer_size.min(u64::from(u32::MAX)) as u32;
        a
    }

    /// Open the sampler on (tid, cpu), dropping flags the kernel or PMU refuses, in order.
    fn open_sampler(&mut self, tid: i32, cpu: u32, enable_on_exec: bool) -> Result<i32, LiveError> {
        let mut attr = self.sampler_attr(enable_on_exec);
        for f in &self.flags_dropped {
            drop_flag(&mut attr, f);
        }
        let mut leader_fd = -1;
        if let Some(mut leader) = self.spec.leader {
            leader.flags |= SAMPLER_FLAGS | flag::DISABLED | flag::INHERIT;
            if enable_on_exec {
                leader.flags |= flag::ENABLE_ON_EXEC;
            }
            leader_fd = perf_event_open(&leader, tid, cpu as i32, -1)
                .map_err(|e| self.open_error("mem-loads-aux (group leader)", tid, cpu, e))?;
            self.fds.push(leader_fd);
        }
        let fallbacks = ["inherit_thread", "exclude_kernel", "weight+data_src"];
        loop {
            match perf_event_open(&attr, tid, cpu as i32, leader_fd) {
                Ok(fd) => {
                    self.fds.push(fd);
                    return Ok(fd);
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) || e.raw_os_error() == Some(libc::E2BIG) => {
                    let next = fallbacks
                        .iter()
                        .find(|f| !self.flags_dropped.iter().any(|d| d == *f) && applies(&attr, f));
                    match next {
                        Some(f) => {
                            drop_flag(&mut attr, f);
                            self.flags_dropped.push(f.to_string());
                            if *f == "inherit_thread" {
                                self.filter_pid = true;
                            }
                        }
                        None => return Err(self.open_error(&self.spec.name.clone(), tid, cpu, e)),
                    }
                }
                Err(e) => return Err(self.open_error(&self.spec.name.clone(), tid, cpu, e)),
            }
        }
    }

    /// The sampler on every process of `cpu` (IBS PMUs without per-task support), enabled at
    /// once: the recorder keeps only the target's samples. Needs CAP_PERFMON or
    /// `perf_event_paranoid` <= 0.
    fn open_cpu_wide(&mut self, cpu: u32) -> Result<i32, LiveError> {
        let mut attr = cpu_wide_attr(&self.sampler_attr(false));
        for f in &self.flags_dropped {
            drop_flag(&mut attr, f);
        }
        let fd = perf_event_open(&attr, -1, cpu as i32, -1)
            .map_err(|e| self.open_error(&format!("{} cpu-wide", self.spec.name), -1, cpu, e))?;
        self.fds.push(fd);
        Ok(fd)
    }

    fn open_error(&self, name: &str, tid: i32, cpu: u32, e: std::io::Error) -> LiveError {
        let what = format!("perf_event_open({name}, {}, tid {tid}, cpu {cpu})", self.spec.backend);
        let hint = match e.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) => format!(
                "; not allowed with kernel.perf_event_paranoid = {}: run as root, give CAP_PERFMON, or \
                 `sysctl kernel.perf_event_paranoid=2` (own processes, user space)",
                paranoid()
            ),
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
                format!(
                    "; this CPU or kernel does not support the event; use --backend {}",
                    Backend::PageFaults
                )
            }
            Some(libc::ESRCH) => "; the process is gone".into(),
            Some(libc::EMFILE) | Some(libc::ENFILE) => "; too many open files (raise `ulimit -n`)".into(),
            _ => String::new(),
        };
        LiveError::Os { what: format!("{what}{hint}"), err: e }
    }

    fn open_ring(&mut self, fd: i32, cpu: u32) -> Result<(), LiveError> {
        let data_size = Self::ring_data_size(self.cfg.buffer_size);
        // One control page, then the data pages.
        let map_len = data_size + PAGE_SIZE as usize;
        // SAFETY: mapping a perf fd's ring as documented (control page + 2^n data pages).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            let hint = if matches!(err.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOMEM)) {
                " (the ring exceeds kernel.perf_event_mlock_kb for this user: lower --buffer-size)"
            } else {
                ""
            };
            return Err(LiveError::Os {
                what: format!("mmap of the {data_size}-byte ring of cpu {cpu}{hint}"),
                err,
            });
        }
        let base = base as *mut u8;
        // SAFETY: the control page was just mapped.
        let (off, size) = unsafe {
            (
                std::ptr::read_volatile(base.add(mmap_page::DATA_OFFSET) as *const u64),
                std::ptr::read_volatile(base.add(mmap_page::DATA_SIZE) as *const u64),
            )
        };
        let (data_offset, data_size) =
            if size == 0 { (PAGE_SIZE as usize, data_size) } else { (off as usize, size as usize) };
        self.rings.push(Ring {
            cpu,
            fd,
            base,
            map_len,
            data_offset,
            data_size,
            last_drain_ns: 0,
            hup: false,
            sideband_pos: 0,
        });
        Ok(())
    }

    /// Open the events of `tids` on every online CPU; the first thread's event of a CPU owns
    /// the ring, the others write into it.
    fn open_events(&mut self, tids: &[i32], enable_on_exec: bool) -> Result<(), LiveError> {
        let cpus = online_cpus();
        for &cpu in &cpus {
            let ring_idx = self.rings.iter().position(|r| r.cpu == cpu);
            let mut owner = ring_idx.map(|i| self.rings[i].fd);
            // CPU-wide mode: one event per CPU, already open for this CPU.
            if self.cpu_wide && owner.is_some() {
                continue;
            }
            for &tid in tids {
                let opened = if self.cpu_wide {
                    self.open_cpu_wide(cpu)
                } else {
                    self.open_sampler(tid, cpu, enable_on_exec)
                };
                let fd = match opened {
                    Ok(fd) => fd,
                    // IBS PMUs that only count CPU-wide refuse per-task events: fall back to one
                    // event per CPU and keep only the target's samples.
                    Err(LiveError::Os { err, .. })
                        if self.spec.backend == Backend::AmdIbs
                            && !self.cpu_wide
                            && matches!(err.raw_os_error(), Some(libc::EINVAL) | Some(libc::EOPNOTSUPP)) =>
                    {
                        self.cpu_wide = true;
                        self.filter_pid = true;
                        self.flags_dropped.push("per-task (cpu-wide ibs_op, samples filtered by pid)".into());
                        self.open_cpu_wide(cpu)?
                    }
                    // A thread that exited since it was listed.
                    Err(LiveError::Os { err, .. })
                        if err.raw_os_error() == Some(libc::ESRCH) && tid != self.pid =>
                    {
                        continue
                    }
                    Err(e) => return Err(e),
                };
                let id =
                    event_id(fd).map_err(|err| LiveError::Os { what: "PERF_EVENT_IOC_ID".into(), err })?;
                self.id_types.insert(id, self.spec.attr.sample_type);
                match owner {
                    None => {
                        self.open_ring(fd, cpu)?;
                        owner = Some(fd);
                        if self.cpu_wide {
                            break;
                        }
                    }
                    Some(o) => ioctl(fd, IOC_SET_OUTPUT, o as libc::c_ulong).map_err(|err| {
                        LiveError::Os { what: format!("PERF_EVENT_IOC_SET_OUTPUT on cpu {cpu}"), err }
                    })?,
                }
            }
        }
        Ok(())
    }

    /// Fork `argv`, open the events on the child, then let it exec.
    pub fn launch(cfg: RecorderConfig, argv: &[OsString]) -> Result<Recorder, LiveError> {
        let (spec, notes) = Self::encode(&cfg)?;
        let Some(cmd) = argv.first() else { return Err(LiveError::Usage("no command given".into())) };
        let path = resolve_command(cmd)?;
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| LiveError::Usage(format!("{}: path contains a NUL byte", path.display())))?;
        let c_args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| LiveError::Usage("an argument contains a NUL byte".into()))?;
        let mut c_argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
        c_argv.push(std::ptr::null());

        let mut go = [0i32; 2];
        let mut err_pipe = [0i32; 2];
        // SAFETY: pipe2 fills the arrays.
        if unsafe { libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(os_err("pipe2"));
        }
        // SAFETY: as above.
        if unsafe { libc::pipe2(err_pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            close(go[0]);
            close(go[1]);
            return Err(os_err("pipe2"));
        }
        // SAFETY: the child only calls async-signal-safe functions (read, signal, sigprocmask,
        // execv, write, _exit) on data prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(os_err("fork"));
        }
        if pid == 0 {
            // SAFETY: in the child, see above.
            unsafe {
                libc::close(go[1]);
                libc::close(err_pipe[0]);
                // Undo what a Python parent changed: ignored SIGPIPE/SIGXFSZ, blocked signals.
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
                let mut b = 0u8;
                loop {
                    let n = libc::read(go[0], &mut b as *mut u8 as *mut libc::c_void, 1);
                    if n == 1 {
                        break;
                    }
                    if n == 0 || *libc::__errno_location() != libc::EINTR {
                        libc::_exit(127); // the recorder gave up before starting us
                    }
                }
                libc::execv(c_path.as_ptr(), c_argv.as_ptr());
                let e = *libc::__errno_location();
                libc::write(err_pipe[1], &e as *const i32 as *const libc::c_void, 4);
                libc::_exit(127);
            }
        }
        close(go[0]);
        close(err_pipe[1]);
        let mut rec = Recorder::new(cfg, spec, notes, pid, true);
        let reap = |pid: i32| {
            let mut st = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut st, 0) };
        };
        if let Err(e) = rec.open_events(&[pid], true) {
            close(go[1]); // the child reads EOF and exits 127 without running the command
            close(err_pipe[0]);
            reap(pid);
            return Err(e);
        }
        rec.t0 = monotonic_ns();
        let one = 1u8;
        // SAFETY: writing one byte to our pipe.
        unsafe { libc::write(go[1], &one as *const u8 as *const libc::c_void, 1) };
        close(go[1]);
        let mut errno = 0i32;
        // SAFETY: reading at most 4 bytes into an i32.
        let n = unsafe { libc::read(err_pipe[0], &mut errno as *mut i32 as *mut libc::c_void, 4) };
        close(err_pipe[0]);
        if n == 4 {
            reap(pid);
            return Err(LiveError::Os {
                what: format!("exec {}", path.display()),
                err: std::io::Error::from_raw_os_error(errno),
            });
        }
        rec.pidfd = pidfd_open(pid)?;
        rec.tids.insert(pid as u32);
        rec.last_snapshot_ns = 0;
        Ok(rec)
    }

    /// Attach to a running process: every thread, and every thread it creates.
    pub fn attach(cfg: RecorderConfig, pid: i32) -> Result<Recorder, LiveError> {
        let (spec, notes) = Self::encode(&cfg)?;
        if pid <= 0 || !Path::new(&format!("/proc/{pid}")).is_dir() {
            return Err(LiveError::Usage(format!("--pid {pid}: no such process")));
        }
        let mut rec = Recorder::new(cfg, spec, notes, pid, false);
        rec.pidfd = pidfd_open(pid)?;
        raise_nofile_limit();
        let mut opened: BTreeSet<i32> = BTreeSet::new();
        // Threads created while we open are inherited from a thread already opened, or seen by
        // the next listing; stop when a listing brings nothing new.
        for _ in 0..100 {
            let tids: Vec<i32> = list_tids(pid)?.into_iter().filter(|t| !opened.contains(t)).collect();
            if tids.is_empty() {
                break;
            }
            rec.open_events(&tids, false)?;
            opened.extend(&tids);
        }
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .map_err(|err| LiveError::Os { what: format!("/proc/{pid}/maps"), err })?;
        rec.t0 = monotonic_ns();
        rec.tracker.initial(0, &maps::parse_maps(&maps));
        for &fd in &rec.fds {
            ioctl(fd, IOC_ENABLE, 0)
                .map_err(|err| LiveError::Os { what: "PERF_EVENT_IOC_ENABLE".into(), err })?;
        }
        rec.tids.extend(opened.iter().map(|t| *t as u32));
        Ok(rec)
    }

    /// Nanoseconds since the recording started.
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.t0)
    }

    /// The ring's data area size in bytes.
    pub fn ring_bytes(&self) -> usize {
        Self::ring_data_size(self.cfg.buffer_size)
    }

    pub fn cpus(&self) -> Vec<u32> {
        self.rings.iter().map(|r| r.cpu).collect()
    }

    pub fn exit(&self) -> Exit {
        self.exit
    }

    fn drain_ring(&mut self, idx: usize, watermark: bool) {
        let now = self.now_ns();
        self.rings[idx].last_drain_ns = now;
        let ring = &self.rings[idx];
        let (tail, head) = (ring.tail(), ring.head());
        if head == tail {
            return;
        }
        let cpu = ring.cpu;
        let drain = self.next_drain;
        let mut records: Vec<Vec<u8>> = Vec::new();
        let mut scratch = std::mem::take(&mut self.scratch);
        let res = ring::for_each_record(ring.data(), tail, head, &mut scratch, |r| records.push(r.to_vec()));
        self.scratch = scratch;
        if res.is_err() {
            self.stats.corrupt_rings += 1;
        }
        // Mapping records of every ring go to the tracker first, in time order, so the
        // tracker sees them before any snapshot taken after this drain. This ring's records
        // are fed before its tail moves: feeding starts at the tail, and once the tail is at
        // `head` the records just read would be skipped while the ring's feed position passes
        // them (the target writes on), and its mappings would be lost.
        self.feed_sideband();
        self.rings[idx].set_tail(head);
        let fed = self.rings[idx].sideband_pos;
        let mut n = 0u32;
        let mut pos = tail;
        for r in &records {
            let at = pos;
            pos += r.len() as u64;
            if at < fed && is_sideband(r) {
                continue;
            }
            if self.handle(r, drain) {
                n += 1;
            }
        }
        if n > 0 {
            self.pending.drains.push(Drain { time_ns: now, cpu, drain, records: n });
            self.next_drain += 1;
            self.stats.drains += 1;
            if watermark {
                self.stats.watermark_drains += 1;
            } else {
                self.stats.timer_drains += 1;
            }
        }
    }

    /// Feed the mapping tracker every mmap and comm record the rings hold that it has not
    /// seen, from all rings at once in time order (the samples stay for their drain).
    /// A snapshot of `/proc/PID/maps` must come after the records that explain it: a range
    /// found there without its MMAP2 record would be taken for an unreported mapping.
    fn feed_sideband(&mut self) {
        let mut found: Vec<Vec<u8>> = Vec::new();
        let mut scratch = std::mem::take(&mut self.scratch);
        for ring in &mut self.rings {
            let from = ring.tail().max(ring.sideband_pos);
            let head = ring.head();
            if head <= from {
                continue;
            }
            match ring::for_each_record(ring.data(), from, head, &mut scratch, |r| {
                if is_sideband(r) {
                    found.push(r.to_vec());
                }
            }) {
                Ok(pos) => ring.sideband_pos = pos,
                Err(_) => ring.sideband_pos = from, // the drain reports the corruption
            }
        }
        self.scratch = scratch;
        if found.is_empty() {
            return;
        }
        let types = &self.id_types;
        let mut parsed: Vec<(u64, usize, Record)> = Vec::new();
        for (i, raw) in found.iter().enumerate() {
            if let Ok(r) = ring::parse_record(raw, ID_TYPE, |id| types.get(&id).copied()) {
                let t = match &r {
                    Record::Mmap { sid, .. } | Record::Comm { sid, .. } => sid.time.unwrap_or(0),
                    _ => 0,
                };
                parsed.push((t, i, r));
            }
        }
        parsed.sort_by_key(|(t, i, _)| (*t, *i));
        for (_, _, r) in parsed {
            self.handle_record(r, 0);
        }
    }

    fn rel(&self, t: Option<u64>) -> u64 {
        t.map(|t| t.saturating_sub(self.t0)).unwrap_or_else(|| self.now_ns())
    }

    /// Act on one record; true when it was a sample kept for the recording.
    fn handle(&mut self, raw: &[u8], drain: u64) -> bool {
        let types = &self.id_types;
        let rec = match ring::parse_record(raw, ID_TYPE, |id| types.get(&id).copied()) {
            Ok(r) => r,
            Err(_) => {
                self.stats.unparsed_records += 1;
                return false;
            }
        };
        self.handle_record(rec, drain)
    }

    fn handle_record(&mut self, rec: Record, drain: u64) -> bool {
        match rec {
            Record::Sample(s) => {
                if self.filter_pid && s.pid != self.pid as u32 {
                    self.stats.other_process_samples += 1;
                    return false;
                }
                if s.addr == 0 {
                    self.stats.samples_without_addr += 1;
                    return false;
                }
                self.pending.samples.push(s.row(self.t0, &self.spec.name, drain));
                self.stats.samples += 1;
                self.tids.insert(s.tid);
                true
            }
            Record::Mmap { pid, addr, len, filename, sid, .. } => {
                if pid == self.pid as u32 {
                    let t = self.rel(sid.time);
                    self.tracker.on_mmap(t, addr, len, &filename);
                }
                false
            }
            Record::Comm { pid, exec: true, sid, .. } if pid == self.pid as u32 => {
                let t = self.rel(sid.time);
                self.tracker.on_exec(t);
                false
            }
            Record::Lost { lost, .. } => {
                self.stats.lost_records += 1;
                self.stats.lost += lost;
                false
            }
            Record::LostSamples { lost, .. } => {
                self.stats.lost_samples += lost;
                false
            }
            Record::Throttle { .. } => {
                self.stats.throttled += 1;
                false
            }
            Record::Unthrottle { .. } => {
                self.stats.unthrottled += 1;
                false
            }
            Record::Fork { pid, tid, .. } if pid == self.pid as u32 => {
                self.tids.insert(tid);
                false
            }
            _ => false,
        }
    }

    fn snapshot(&mut self) {
        self.last_snapshot_ns = self.now_ns();
        if self.exit != Exit::Running {
            return;
        }
        self.feed_sideband();
        // Every snapshot reads `maps`; `smaps` (page sizes: THP, hugetlbfs) at most every
        // SMAPS_INTERVAL_NS and no more than 2% of the time, as it walks the page tables.
        let now = self.now_ns();
        let due = self.last_smaps_ns.is_none_or(|last| {
            now.saturating_sub(last) >= SMAPS_INTERVAL_NS.max(self.smaps_cost_ns.saturating_mul(50))
        });
        let file = if due { "smaps" } else { "maps" };
        let began = monotonic_ns();
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/{file}", self.pid)) else { return };
        let (vmas, entries) = if due {
            let e = maps::parse_smaps(&text);
            self.smaps_cost_ns = monotonic_ns().saturating_sub(began);
            self.last_smaps_ns = Some(now);
            self.stats.smaps_reads += 1;
            (e.iter().map(|x| x.vma.clone()).collect(), Some(e))
        } else {
            (maps::parse_maps(&text), None)
        };
        // An exiting process shows no mappings at all: that is not an unmapping.
        if vmas.is_empty() {
            return;
        }
        let t = self.now_ns();
        self.tracker.on_snapshot(t, &vmas);
        if let Some(e) = entries {
            self.tracker.on_page_sizes(t, &e);
        }
        self.stats.snapshots = self.tracker.snapshots;
        self.stats.max_snapshot_gap_ns = self.tracker.max_snapshot_gap_ns;
    }

    fn check_exit(&mut self) {
        if self.exit != Exit::Running {
            return;
        }
        let mut pfd = libc::pollfd { fd: self.pidfd, events: libc::POLLIN, revents: 0 };
        // SAFETY: polling one valid descriptor without waiting.
        let ready = unsafe { libc::poll(&mut pfd, 1, 0) } > 0;
        if !ready {
            return;
        }
        if self.launched {
            let mut st = 0;
            // SAFETY: reaping our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
            if r == self.pid {
                self.exit = if libc::WIFSIGNALED(st) {
                    Exit::Signal(libc::WTERMSIG(st))
                } else {
                    Exit::Code(libc::WEXITSTATUS(st))
                };
            }
        } else {
            self.exit = Exit::Gone;
        }
    }

    /// Wait up to `timeout_ms` for data, drain what is due, and return the rows produced.
    /// Returns early (with what was gathered) when a signal interrupts the wait.
    pub fn poll(&mut self, timeout_ms: i32) -> Batch {
        if self.exit == Exit::Running {
            let until_snapshot = (self.last_snapshot_ns + self.cfg.snapshot_every_ns())
                .saturating_sub(self.now_ns())
                / 1_000_000;
            let timeout = (timeout_ms as u64).min(until_snapshot.max(1)) as i32;
            // A ring whose owning event's task exited reports POLLHUP forever: it is left out
            // of the wait (the flush timer and the final drain still read it), or the wait
            // would spin.
            let mut pfds: Vec<libc::pollfd> = self
                .rings
                .iter()
                .map(|r| libc::pollfd { fd: if r.hup { -1 } else { r.fd }, events: libc::POLLIN, revents: 0 })
                .collect();
            pfds.push(libc::pollfd { fd: self.pidfd, events: libc::POLLIN, revents: 0 });
            // SAFETY: polling descriptors we own (negative ones are ignored).
            let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
            if n > 0 {
                let mut drained = false;
                for (i, pfd) in pfds.iter().take(self.rings.len()).enumerate() {
                    let ev = pfd.revents;
                    if ev & (libc::POLLHUP | libc::POLLERR) != 0 {
                        self.rings[i].hup = true;
                    }
                    if ev & libc::POLLIN != 0 {
                        self.drain_ring(i, true);
                        drained = true;
                    }
                }
                if drained {
                    self.snapshot();
                }
            }
        }
        self.check_exit();
        let now = self.now_ns();
        for i in 0..self.rings.len() {
            if now.saturating_sub(self.rings[i].last_drain_ns) >= self.cfg.drain_timer_ns() {
                self.drain_ring(i, false);
            }
        }
        if now.saturating_sub(self.last_snapshot_ns) >= self.cfg.snapshot_every_ns() {
            self.snapshot();
        }
        self.take()
    }

    /// Drain everything left (the target exited, or recording stops) and take the last rows.
    pub fn finish(&mut self) -> Batch {
        self.check_exit();
        for i in 0..self.rings.len() {
            self.drain_ring(i, false);
        }
        self.snapshot();
        self.take()
    }

    fn take(&mut self) -> Batch {
        let mut b = std::mem::take(&mut self.pending);
        b.mappings = self.tracker.take_events();
        b.page_sizes = self.tracker.take_page_sizes();
        self.stats.threads = self.tids.len() as u64;
        b
    }

    /// Thread ids seen (at the start and in samples).
    pub fn threads(&self) -> Vec<u32> {
        self.tids.iter().copied().collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.rings.clear();
        for fd in self.fds.drain(..) {
            close(fd);
        }
        close(self.pidfd);
        if self.launched && self.exit == Exit::Running {
            // Reap the child if it is already gone; otherwise it runs on (and init reaps it).
            let mut st = 0;
            // SAFETY: non-blocking wait for our own child.
            unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        }
    }
}

/// An mmap or comm record (what the mapping tracker needs), by its header's type.
fn is_sideband(raw: &[u8]) -> bool {
    raw.len() >= 4 && {
        let t = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
        t == crate::perf::record::MMAP || t == crate::perf::record::MMAP2 || t == crate::perf::record::COMM
    }
}

/// A per-task sampler turned into a CPU-wide one: no inheritance, no enable-on-exec, enabled.
pub fn cpu_wide_attr(attr: &PerfEventAttr) -> PerfEventAttr {
    let mut a = *attr;
    a.flags &= !(flag::INHERIT | flag::INHERIT_THREAD | flag::ENABLE_ON_EXEC | flag::DISABLED);
    a
}

fn applies(attr: &PerfEventAttr, what: &str) -> bool {
    match what {
        "inherit_thread" => attr.has(flag::INHERIT_THREAD),
        "exclude_kernel" => attr.has(flag::EXCLUDE_KERNEL),
        "weight+data_src" => attr.sample_type & (sample::WEIGHT | sample::DATA_SRC) != 0,
        _ => false,
    }
}

fn drop_flag(attr: &mut PerfEventAttr, what: &str) {
    match what {
        "inherit_thread" => attr.flags &= !flag::INHERIT_THREAD,
        "exclude_kernel" => attr.flags &= !flag::EXCLUDE_KERNEL,
        "weight+data_src" => attr.sample_type &= !(sample::WEIGHT | sample::DATA_SRC),
        _ => {}
    }
}

fn pidfd_open(pid: i32) -> Result<i32, LiveError> {
    // SAFETY: pidfd_open(pid, 0) has no memory arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(os_err(format!("pidfd_open({pid}) (needs Linux 5.3 or later)")));
    }
    Ok(fd as i32)
}

fn list_tids(pid: i32) -> Result<Vec<i32>, LiveError> {
    let dir = format!("/proc/{pid}/task");
    let rd = std::fs::read_dir(&dir).map_err(|err| LiveError::Os { what: dir.clone(), err })?;
    let mut tids: Vec<i32> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

fn raise_nofile_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: get/setrlimit on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes() {
        assert_eq!(Recorder::ring_data_size(64 << 10), 512 << 10);
        assert_eq!(Recorder::ring_data_size(8 << 10), 512 << 10);
        assert_eq!(Recorder::ring_data_size(1), 512 << 10);
        assert_eq!(Recorder::ring_data_size(300 << 10), 1 << 20);
        assert_eq!(Recorder::ring_data_size(1 << 20), 2 << 20);
    }

    #[test]
    fn cpu_wide_attributes() {
        let period = crate::events::amd::DEFAULT_PERIOD;
        let mut a = crate::events::amd_ibs_event(11, period, true, false).unwrap().attr;
        a.flags |= flag::INHERIT | flag::INHERIT_THREAD | flag::ENABLE_ON_EXEC | flag::DISABLED | flag::MMAP2;
        let c = cpu_wide_attr(&a);
        assert_eq!(c.flags, flag::MMAP2);
        assert_eq!((c.type_, c.config, c.sample_period), (11, 1 << 19, period));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,6"), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_cpu_list("0"), vec![0]);
        assert!(parse_cpu_list("").is_empty());
    }

    #[test]
    fn command_resolution() {
        assert!(resolve_command(OsStr::new("sh")).is_ok());
        let e = resolve_command(OsStr::new("no-such-command-tierlab")).unwrap_err().to_string();
        assert_eq!(e, "no-such-command-tierlab: command not found");
        let e = resolve_command(OsStr::new("./no/such/file")).unwrap_err().to_string();
        assert!(e.ends_with("no such file"), "{e}");
    }

    #[test]
    fn launch_records_page_faults_of_a_real_program() {
        let cfg = RecorderConfig {
            backend: BackendChoice::Use(Backend::PageFaults),
            min_mapping: 0,
            ..RecorderConfig::default()
        };
        // `sh -c` touches pages (its own startup) and exits quickly.
        let argv: Vec<OsString> = ["sh", "-c", "exit 3"].iter().map(OsString::from).collect();
        let mut rec = match Recorder::launch(cfg, &argv) {
            Ok(r) => r,
            Err(e) => {
                // perf_event_open may be forbidden where these tests run (containers).
                eprintln!("skipped: {e}");
                return;
            }
        };
        let mut samples = 0;
        let mut maps = 0;
        for _ in 0..2000 {
            let b = rec.poll(50);
            samples += b.samples.len();
            maps += b.mappings.len();
            if rec.exit() != Exit::Running {
                break;
            }
        }
        let b = rec.finish();
        samples += b.samples.len();
        maps += b.mappings.len();
        assert_eq!(rec.exit(), Exit::Code(3));
        assert!(samples > 10, "{samples} samples");
        assert!(maps > 0);
        assert_eq!(rec.stats.samples as usize, samples);
    }

    /// The recorder's sample rows are core's `Sample` (the recording schema's `samples` row),
    /// its drains core's `Drain` and its mapping history core's `MappingEvent`.
    #[test]
    fn rows_are_the_core_row_types() {
        use crate::ring::synth;
        let spec = crate::events::page_fault_event(1).unwrap();
        let mut rec = Recorder::new(RecorderConfig::default(), spec, Vec::new(), 42, false);
        rec.t0 = 1_000;
        rec.id_types.insert(7, crate::events::BASE_SAMPLE_TYPE);
        let raw = synth::sample(7, 0x40_1000, 42, 43, 1_500, 0x7f00_0000_0000 + 3 * PAGE_SIZE, 1, None);
        assert!(rec.handle(&raw, 5));
        rec.tracker.on_mmap(600, 0x7f00_0000_0000, 8 << 20, "//anon");
        let b: Batch = rec.take();
        let rows: &[tierlab_core::Sample] = &b.samples;
        assert_eq!(
            rows,
            [tierlab_core::Sample {
                time_ns: 500,
                tid: 43,
                cpu: 1,
                addr: 0x7f00_0000_0000 + 3 * PAGE_SIZE,
                ip: 0x40_1000,
                weight: 0,
                data_src: 0,
                event: "page-faults".into(),
                drain: 5,
            }]
        );
        let maps: &[tierlab_core::MappingEvent] = &b.mappings;
        assert_eq!(maps[0].event.as_str(), "map");
        assert_eq!(
            (maps[0].start, maps[0].length, maps[0].name.as_str()),
            (0x7f00_0000_0000, 8 << 20, "[anon]")
        );
        let _: &[tierlab_core::Drain] = &b.drains;
    }

    #[test]
    fn launch_of_a_missing_command_is_an_error() {
        let cfg =
            RecorderConfig { backend: BackendChoice::Use(Backend::PageFaults), ..RecorderConfig::default() };
        let e = Recorder::launch(cfg, &[OsString::from("tierlab-no-such-cmd")]).err().unwrap();
        assert!(e.to_string().contains("command not found"));
    }
}

impl Batch {
    /// Append `other`'s rows.
    pub fn extend(&mut self, other: Batch) {
        self.samples.extend(other.samples);
        self.drains.extend(other.drains);
        self.mappings.extend(other.mappings);
        self.page_sizes.extend(other.page_sizes);
    }
}

/// What the drain thread shares with its owner.
#[derive(Debug, Default)]
struct Shared {
    batch: Batch,
    stats: Stats,
    exit: Option<Exit>,
    threads: Vec<u32>,
    now_ns: u64,
    /// The thread drained everything and stopped.
    done: bool,
}

/// A [`Recorder`] drained by a thread of its own, so the rings are emptied while the owner
/// is busy (writing to disk): the owner takes the rows gathered so far with
/// [`Background::take`]. The static facts of the recording are copied out at the start.
pub struct Background {
    shared: std::sync::Arc<(std::sync::Mutex<Shared>, std::sync::Condvar)>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
    pub spec: EventSpec,
    pub auto_notes: Vec<String>,
    pub flags_dropped: Vec<String>,
    pub pid: i32,
    pub ring_bytes: usize,
    pub cpus: Vec<u32>,
}

impl Background {
    /// Start draining `rec` every `interval_ms` at most (sooner when a watermark is reached).
    pub fn start(mut rec: Recorder, interval_ms: i32) -> Background {
        use std::sync::atomic::Ordering;
        let shared =
            std::sync::Arc::new((std::sync::Mutex::new(Shared::default()), std::sync::Condvar::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let info = (
            rec.spec.clone(),
            rec.auto_notes.clone(),
            rec.flags_dropped.clone(),
            rec.pid,
            rec.ring_bytes(),
            rec.cpus(),
        );
        let (sh, st) = (shared.clone(), stop.clone());
        let publish = move |rec: &Recorder, b: Batch, done: bool| {
            let (lock, cv) = &*sh;
            let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
            g.batch.extend(b);
            g.stats = rec.stats.clone();
            g.threads = rec.threads();
            g.now_ns = rec.now_ns();
            if rec.exit() != Exit::Running {
                g.exit = Some(rec.exit());
            }
            g.done = done;
            cv.notify_all();
        };
        let handle = std::thread::Builder::new()
            .name("tierlab-drain".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    let b = rec.poll(interval_ms);
                    publish(&rec, b, false);
                    if rec.exit() != Exit::Running {
                        break;
                    }
                }
                let b = rec.finish();
                publish(&rec, b, true);
                // `rec` drops here: events and rings close; the target runs on.
            })
            .ok();
        let (spec, auto_notes, flags_dropped, pid, ring_bytes, cpus) = info;
        Background { shared, stop, handle, spec, auto_notes, flags_dropped, pid, ring_bytes, cpus }
    }

    /// Wait up to `timeout_ms` for rows, then take what was gathered. The second value is
    /// true once the drain thread has finished (the target exited, or [`Background::stop`]).
    pub fn take(&self, timeout_ms: u64) -> (Batch, bool) {
        let (lock, cv) = &*self.shared;
        let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
        if g.batch.is_empty() && !g.done {
            let (g2, _) = cv
                .wait_timeout(g, std::time::Duration::from_millis(timeout_ms))
                .unwrap_or_else(|e| e.into_inner());
            g = g2;
        }
        (std::mem::take(&mut g.batch), g.done)
    }

    /// Stop recording: the thread drains what is left and ends. Returns the last rows.
    pub fn stop(&mut self) -> Batch {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let (lock, _) = &*self.shared;
        let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut g.batch)
    }

    pub fn stats(&self) -> Stats {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).stats.clone()
    }

    pub fn threads(&self) -> Vec<u32> {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).threads.clone()
    }

    pub fn now_ns(&self) -> u64 {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).now_ns
    }

    /// How the target ended, once the drain thread has seen it.
    pub fn exit(&self) -> Option<Exit> {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).exit
    }

    /// True once the thread drained everything and stopped.
    pub fn done(&self) -> bool {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).done
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop();
    }
}
