//! Backends and their event encodings: Intel PEBS (load latency, all loads, all stores),
//! AMD IBS op sampling, and the software page-fault fallback; and the detection of which
//! backends this machine's PMUs support (from sysfs, under a root that tests can replace).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::perf::{flag, sample, sw, type_id, PerfEventAttr};

/// Where the kernel lists its PMUs.
pub const SYSFS_PMUS: &str = "/sys/bus/event_source/devices";

/// A source of memory-access samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Intel PEBS memory events on the core PMU.
    IntelPebs,
    /// AMD Instruction-Based Sampling of ops (`ibs_op` PMU).
    AmdIbs,
    /// Software page-fault events with the faulting address (works without a PMU).
    PageFaults,
}

impl Backend {
    /// Every backend, in the order `auto` tries them.
    pub const ALL: [Backend; 3] = [Backend::IntelPebs, Backend::AmdIbs, Backend::PageFaults];

    /// The name used on the command line and in recordings.
    pub fn name(self) -> &'static str {
        match self {
            Backend::IntelPebs => "intel-pebs",
            Backend::AmdIbs => "amd-ibs",
            Backend::PageFaults => "page-faults",
        }
    }

    /// Parse a backend name (`auto` is not a backend: see [`BackendChoice`]).
    pub fn parse(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Event names this backend accepts for `--event`, the default first.
    pub fn events(self) -> &'static [&'static str] {
        match self {
            Backend::IntelPebs => &[intel::MEM_LOADS, intel::ALL_LOADS, intel::ALL_STORES],
            Backend::AmdIbs => &[amd::IBS_OP],
            Backend::PageFaults => &[PAGE_FAULTS],
        }
    }

    /// The default sampling period (reset value) of this backend.
    pub fn default_period(self) -> u64 {
        match self {
            // The McKernel driver's default reset value.
            Backend::IntelPebs => 100,
            Backend::AmdIbs => amd::DEFAULT_PERIOD,
            // Every fault: first touches of pages are what this backend can see.
            Backend::PageFaults => 1,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `--backend`: a backend, or `auto` (the first one the machine supports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Use(Backend),
}

impl BackendChoice {
    /// `auto`, then every backend in the order `auto` tries them.
    pub fn all() -> impl Iterator<Item = BackendChoice> {
        std::iter::once(BackendChoice::Auto).chain(Backend::ALL.into_iter().map(BackendChoice::Use))
    }

    /// The name used on the command line and in configurations.
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Use(b) => b.name(),
        }
    }

    pub fn parse(name: &str) -> Option<BackendChoice> {
        BackendChoice::all().find(|c| c.name() == name)
    }
}

/// Event name of the software fallback.
pub const PAGE_FAULTS: &str = "page-faults";

/// Intel encodings (raw `config` = umask << 8 | event).
pub mod intel {
    /// `mem-loads`: MEM_TRANS_RETIRED.LOAD_LATENCY, event 0xcd umask 0x01, threshold in config1.
    pub const MEM_LOADS: &str = "mem-loads";
    /// MEM_INST_RETIRED.ALL_LOADS, event 0xd0 umask 0x81.
    pub const ALL_LOADS: &str = "all-loads";
    /// MEM_INST_RETIRED.ALL_STORES, event 0xd0 umask 0x82.
    pub const ALL_STORES: &str = "all-stores";
    pub const MEM_LOADS_CONFIG: u64 = 0x1cd;
    pub const ALL_LOADS_CONFIG: u64 = 0x81d0;
    pub const ALL_STORES_CONFIG: u64 = 0x82d0;
    /// `mem-loads-aux` (event 0x03 umask 0x82): the group leader Sapphire Rapids requires.
    pub const MEM_LOADS_AUX_CONFIG: u64 = 0x8203;
    /// `ldlat` occupies config1 bits 0-15.
    pub const LDLAT_MAX: u64 = 0xffff;
}

/// AMD IBS encodings.
pub mod amd {
    /// The IBS op sampler.
    pub const IBS_OP: &str = "ibs-op";
    /// `cnt_ctl`: count dispatched ops instead of cycles (config bit 19).
    pub const CNT_CTL_BIT: u64 = 1 << 19;
    /// `l3missonly`: only ops that missed L3 (config bit 16, Zen 4 and later).
    pub const L3_MISS_ONLY_BIT: u64 = 1 << 16;
    /// The period's low 4 bits must be zero, and it must be at least this.
    pub const MIN_PERIOD: u64 = 16;
    /// Default period: one sample every 4096 dispatched ops (a count of ops, a multiple of 16;
    /// not a page size).
    pub const DEFAULT_PERIOD: u64 = 4096; // not a page size: an IBS op count
}

/// What was wrong with an event request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventError {
    /// The machine lacks what the backend needs (a PMU, an event): says what and what works.
    Unsupported { backend: Backend, reason: String },
    /// A parameter value the backend cannot take.
    Invalid(String),
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::Unsupported { backend, reason } => {
                write!(f, "{backend}: {reason}; use --backend page-faults")
            }
            EventError::Invalid(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for EventError {}

/// A fully encoded event: the sampler's attribute and, where the CPU requires one, a counting
/// group leader opened first (Sapphire Rapids' `mem-loads-aux`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// Name stored in the samples' `event` column.
    pub name: String,
    pub backend: Backend,
    pub attr: PerfEventAttr,
    pub leader: Option<PerfEventAttr>,
}

/// Sample fields every backend records (IDENTIFIER first, so records of several events can
/// share a ring buffer).
pub const BASE_SAMPLE_TYPE: u64 =
    sample::IDENTIFIER | sample::IP | sample::TID | sample::TIME | sample::ADDR | sample::CPU;
/// What PEBS and IBS add: the access latency and the data source.
pub const MEMORY_SAMPLE_TYPE: u64 = BASE_SAMPLE_TYPE | sample::WEIGHT | sample::DATA_SRC;

fn check_period(period: u64) -> Result<(), EventError> {
    if period == 0 {
        return Err(EventError::Invalid("--period 0: the period (reset value) must be at least 1".into()));
    }
    Ok(())
}

/// Encode an Intel PEBS event. `pmu_type` is the core PMU's type (`cpu/type`, 4 = RAW).
pub fn intel_event(
    pmu_type: u32,
    event: &str,
    period: u64,
    ldlat: u64,
    needs_aux_leader: bool,
) -> Result<EventSpec, EventError> {
    check_period(period)?;
    let config = match event {
        intel::MEM_LOADS => intel::MEM_LOADS_CONFIG,
        intel::ALL_LOADS => intel::ALL_LOADS_CONFIG,
        intel::ALL_STORES => intel::ALL_STORES_CONFIG,
        other => return Err(unknown_event(Backend::IntelPebs, other)),
    };
    let mut attr = PerfEventAttr::new(pmu_type, config);
    attr.sample_period = period;
    attr.sample_type = MEMORY_SAMPLE_TYPE;
    attr.set_precise_ip(1);
    let mut leader = None;
    if event == intel::MEM_LOADS {
        if ldlat == 0 || ldlat > intel::LDLAT_MAX {
            return Err(EventError::Invalid(format!(
                "--ldlat {ldlat}: the load-latency threshold must be 1..=65535 cycles"
            )));
        }
        attr.config1 = ldlat;
        if needs_aux_leader {
            let mut aux = PerfEventAttr::new(pmu_type, intel::MEM_LOADS_AUX_CONFIG);
            aux.set_precise_ip(1);
            leader = Some(aux);
        }
    }
    Ok(EventSpec { name: event.to_string(), backend: Backend::IntelPebs, attr, leader })
}

/// Encode an AMD IBS op event. `pmu_type` comes from `ibs_op/type`.
pub fn amd_ibs_event(
    pmu_type: u32,
    period: u64,
    count_ops: bool,
    l3_miss_only: bool,
) -> Result<EventSpec, EventError> {
    if period < amd::MIN_PERIOD || period & 0xf != 0 {
        let lo = (period & !0xf).max(amd::MIN_PERIOD);
        return Err(EventError::Invalid(format!(
            "--period {period}: amd-ibs needs a multiple of 16, at least 16 (e.g. {lo} or {})",
            lo + 16
        )));
    }
    let mut config = 0;
    if count_ops {
        config |= amd::CNT_CTL_BIT;
    }
    if l3_miss_only {
        config |= amd::L3_MISS_ONLY_BIT;
    }
    let mut attr = PerfEventAttr::new(pmu_type, config);
    attr.sample_period = period;
    attr.sample_type = MEMORY_SAMPLE_TYPE;
    Ok(EventSpec { name: amd::IBS_OP.to_string(), backend: Backend::AmdIbs, attr, leader: None })
}

/// Encode the software page-fault event (every `period`-th fault, with its address).
pub fn page_fault_event(period: u64) -> Result<EventSpec, EventError> {
    check_period(period)?;
    let mut attr = PerfEventAttr::new(type_id::SOFTWARE, sw::PAGE_FAULTS);
    attr.sample_period = period;
    attr.sample_type = BASE_SAMPLE_TYPE;
    Ok(EventSpec { name: PAGE_FAULTS.to_string(), backend: Backend::PageFaults, attr, leader: None })
}

fn unknown_event(backend: Backend, event: &str) -> EventError {
    EventError::Invalid(format!(
        "--event {event}: {backend} has no such event (choose from {})",
        backend.events().join(", ")
    ))
}

/// The PMUs of a machine, read from a sysfs directory (normally [`SYSFS_PMUS`]).
#[derive(Clone, Debug)]
pub struct Pmus {
    root: PathBuf,
}

/// The Intel core PMU found on the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntelPmu {
    /// `perf_event_attr.type` of the core PMU.
    pub pmu_type: u32,
    /// Directory name (`cpu`, or `cpu_core` on hybrid CPUs).
    pub dir: String,
    /// True when `mem-loads-aux` exists (Sapphire Rapids and later need it as group leader).
    pub needs_aux_leader: bool,
}

impl Pmus {
    /// The machine's PMUs.
    pub fn system() -> Self {
        Pmus { root: PathBuf::from(SYSFS_PMUS) }
    }

    /// PMUs listed under another directory (tests build fake sysfs trees).
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Pmus { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Names of the PMUs present, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.root)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    fn have(&self) -> String {
        let names = self.names();
        if names.is_empty() {
            format!("{} is empty or unreadable", self.root.display())
        } else {
            format!("this machine has: {}", names.join(", "))
        }
    }

    fn read_type(&self, path: &Path) -> Result<u32, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        text.trim()
            .parse()
            .map_err(|_| format!("{}: not a PMU type number: {:?}", path.display(), text.trim()))
    }

    /// The Intel core PMU with PEBS memory events, or why there is none.
    pub fn intel(&self) -> Result<IntelPmu, EventError> {
        let unsupported = |reason: String| EventError::Unsupported { backend: Backend::IntelPebs, reason };
        let dir = ["cpu_core", "cpu"].into_iter().find(|d| self.root.join(d).is_dir());
        let Some(dir) = dir else {
            return Err(unsupported(format!(
                "no PMU: {} missing ({}; a VM without a virtual PMU has none)",
                self.root.join("cpu").display(),
                self.have()
            )));
        };
        let events = self.root.join(dir).join("events");
        if !events.join("mem-loads").exists() {
            return Err(unsupported(format!(
                "the core PMU has no PEBS load-latency event: {} missing (not an Intel CPU with PEBS)",
                events.join("mem-loads").display()
            )));
        }
        let pmu_type = self.read_type(&self.root.join(dir).join("type")).map_err(unsupported)?;
        Ok(IntelPmu {
            pmu_type,
            dir: dir.to_string(),
            needs_aux_leader: events.join("mem-loads-aux").exists(),
        })
    }

    /// The AMD IBS op PMU's type, or why there is none.
    pub fn amd_ibs(&self) -> Result<u32, EventError> {
        let path = self.root.join("ibs_op").join("type");
        if !path.exists() {
            return Err(EventError::Unsupported {
                backend: Backend::AmdIbs,
                reason: format!("no IBS PMU: {} missing ({})", path.display(), self.have()),
            });
        }
        self.read_type(&path).map_err(|reason| EventError::Unsupported { backend: Backend::AmdIbs, reason })
    }

    /// True when the IBS PMU offers `l3missonly` (Zen 4 and later).
    pub fn amd_l3_miss_only(&self) -> bool {
        self.root.join("ibs_op").join("format").join("l3missonly").exists()
    }

    /// Encode `event` (or the backend's default) for `backend` on this machine.
    pub fn event(
        &self,
        backend: Backend,
        event: Option<&str>,
        period: Option<u64>,
        ldlat: u64,
        l3_miss_only: bool,
    ) -> Result<EventSpec, EventError> {
        let name = event.unwrap_or(backend.events()[0]);
        if !backend.events().contains(&name) {
            return Err(unknown_event(backend, name));
        }
        let period = period.unwrap_or(backend.default_period());
        match backend {
            Backend::IntelPebs => {
                let pmu = self.intel()?;
                intel_event(pmu.pmu_type, name, period, ldlat, pmu.needs_aux_leader)
            }
            Backend::AmdIbs => {
                let pmu_type = self.amd_ibs()?;
                if l3_miss_only && !self.amd_l3_miss_only() {
                    return Err(EventError::Unsupported {
                        backend,
                        reason: format!(
                            "l3missonly needs Zen 4 or later: {} missing",
                            self.root.join("ibs_op/format/l3missonly").display()
                        ),
                    });
                }
                amd_ibs_event(pmu_type, period, true, l3_miss_only)
            }
            Backend::PageFaults => page_fault_event(period),
        }
    }

    /// `auto`: the first backend this machine supports, with the reasons the others failed.
    pub fn auto(&self) -> (Backend, Vec<String>) {
        let mut why = Vec::new();
        match self.intel() {
            Ok(_) => return (Backend::IntelPebs, why),
            Err(e) => why.push(e.to_string()),
        }
        match self.amd_ibs() {
            Ok(_) => return (Backend::AmdIbs, why),
            Err(e) => why.push(e.to_string()),
        }
        (Backend::PageFaults, why)
    }
}

/// Flags every sampler gets (the session adds inherit/enable/watermark flags).
pub const SAMPLER_FLAGS: u64 = flag::EXCLUDE_KERNEL | flag::EXCLUDE_HV | flag::SAMPLE_ID_ALL;

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_sysfs(entries: &[(&str, &str)]) -> (PathBuf, Pmus) {
        let dir = std::env::temp_dir().join(format!(
            "tierlab-live-pmus-{}-{}",
            std::process::id(),
            entries.iter().map(|(p, _)| p.len()).sum::<usize>() * 131 + entries.len()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for (path, content) in entries {
            let p = dir.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }
        (dir.clone(), Pmus::at(dir))
    }

    #[test]
    fn intel_mem_loads_encoding() {
        let e = intel_event(4, "mem-loads", 100, 30, false).unwrap();
        assert_eq!(e.attr.type_, type_id::RAW);
        assert_eq!(e.attr.config, 0x1cd);
        assert_eq!(e.attr.config1, 30);
        assert_eq!(e.attr.sample_period, 100);
        assert_eq!(e.attr.precise_ip(), 1);
        assert_eq!(e.attr.sample_type & (sample::ADDR | sample::WEIGHT | sample::DATA_SRC), 0xc008);
        assert!(e.leader.is_none());
        let e = intel_event(4, "mem-loads", 64, 3, true).unwrap();
        assert_eq!(e.leader.unwrap().config, 0x8203);
        assert_eq!(e.attr.config1, 3);
    }

    #[test]
    fn intel_all_loads_and_stores() {
        let l = intel_event(4, "all-loads", 128, 30, true).unwrap();
        assert_eq!((l.attr.config, l.attr.config1), (0x81d0, 0));
        assert!(l.leader.is_none());
        let s = intel_event(4, "all-stores", 256, 30, false).unwrap();
        assert_eq!(s.attr.config, 0x82d0);
        assert_eq!(s.attr.precise_ip(), 1);
    }

    #[test]
    fn intel_rejects_bad_values() {
        assert!(matches!(intel_event(4, "mem-loads", 100, 0, false), Err(EventError::Invalid(_))));
        assert!(matches!(intel_event(4, "mem-loads", 100, 70000, false), Err(EventError::Invalid(_))));
        assert!(matches!(intel_event(4, "mem-loads", 0, 30, false), Err(EventError::Invalid(_))));
        let err = intel_event(4, "l2-misses", 100, 30, false).unwrap_err().to_string();
        assert!(err.contains("mem-loads, all-loads, all-stores"), "{err}");
    }

    #[test]
    fn amd_ibs_encoding() {
        let e = amd_ibs_event(11, amd::DEFAULT_PERIOD, true, false).unwrap();
        assert_eq!(e.attr.type_, 11);
        assert_eq!(e.attr.config, 1 << 19);
        assert_eq!(e.attr.sample_period, amd::DEFAULT_PERIOD);
        let e = amd_ibs_event(11, 16, true, true).unwrap();
        assert_eq!(e.attr.config, (1 << 19) | (1 << 16));
        let e = amd_ibs_event(11, 32, false, false).unwrap();
        assert_eq!(e.attr.config, 0);
    }

    #[test]
    fn amd_ibs_period_rules() {
        for bad in [0, 8, 15, 17, 100] {
            let err = amd_ibs_event(11, bad, true, false).unwrap_err().to_string();
            assert!(err.contains("multiple of 16"), "{bad}: {err}");
        }
        assert!(amd_ibs_event(11, 96, true, false).is_ok());
        let err = amd_ibs_event(11, 100, true, false).unwrap_err().to_string();
        assert!(err.contains("e.g. 96 or 112"), "{err}");
    }

    #[test]
    fn page_faults_encoding() {
        let e = page_fault_event(1).unwrap();
        assert_eq!((e.attr.type_, e.attr.config, e.attr.sample_period), (1, 2, 1));
        assert_eq!(e.attr.sample_type & sample::ADDR, sample::ADDR);
        assert_eq!(e.attr.sample_type & sample::WEIGHT, 0);
    }

    #[test]
    fn detection_on_a_vm_without_pmu() {
        let (dir, pmus) = fake_sysfs(&[("software/type", "1\n"), ("tracepoint/type", "2\n")]);
        let err = pmus.intel().unwrap_err().to_string();
        assert!(err.starts_with("intel-pebs: no PMU: "), "{err}");
        assert!(err.contains("/cpu missing"), "{err}");
        assert!(err.contains("this machine has: software, tracepoint"), "{err}");
        assert!(err.ends_with("use --backend page-faults"), "{err}");
        let err = pmus.amd_ibs().unwrap_err().to_string();
        assert!(err.contains("ibs_op/type missing"), "{err}");
        let (backend, why) = pmus.auto();
        assert_eq!(backend, Backend::PageFaults);
        assert_eq!(why.len(), 2);
        assert!(pmus.event(Backend::PageFaults, None, None, 30, false).is_ok());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn detection_of_intel_and_amd() {
        let (dir, pmus) = fake_sysfs(&[
            ("cpu/type", "4\n"),
            ("cpu/events/mem-loads", "event=0xcd,umask=0x1,ldlat=3\n"),
            ("cpu/events/mem-loads-aux", "event=0x03,umask=0x82\n"),
        ]);
        assert_eq!(
            pmus.intel().unwrap(),
            IntelPmu { pmu_type: 4, dir: "cpu".into(), needs_aux_leader: true }
        );
        assert_eq!(pmus.auto().0, Backend::IntelPebs);
        let e = pmus.event(Backend::IntelPebs, None, Some(64), 30, false).unwrap();
        assert_eq!((e.name.as_str(), e.attr.config, e.attr.sample_period), ("mem-loads", 0x1cd, 64));
        fs::remove_dir_all(dir).unwrap();

        let (dir, pmus) = fake_sysfs(&[
            ("cpu/type", "4\n"),
            ("ibs_op/type", "11\n"),
            ("ibs_op/format/cnt_ctl", "config:19\n"),
        ]);
        assert!(pmus.intel().unwrap_err().to_string().contains("no PEBS load-latency event"));
        assert_eq!(pmus.amd_ibs().unwrap(), 11);
        assert_eq!(pmus.auto().0, Backend::AmdIbs);
        let err =
            pmus.event(Backend::AmdIbs, None, Some(amd::DEFAULT_PERIOD), 30, true).unwrap_err().to_string();
        assert!(err.contains("l3missonly"), "{err}");
        let e = pmus.event(Backend::AmdIbs, None, None, 30, false).unwrap();
        assert_eq!((e.attr.type_, e.attr.config, e.attr.sample_period), (11, 1 << 19, amd::DEFAULT_PERIOD));
        fs::remove_dir_all(dir).unwrap();
    }
}
