//! The `perf_event_open` ABI: the attribute structure, flag bits, sample types and record
//! types, as in the kernel's `include/uapi/linux/perf_event.h`.
//!
//! Only what the recorder uses is defined. The structure is plain data so event encodings can
//! be built and unit-tested on any platform; opening events lives in `crate::session`.

/// `perf_event_attr.type` values.
pub mod type_id {
    /// Generalised hardware events.
    pub const HARDWARE: u32 = 0;
    /// Software events (page faults, context switches, ...).
    pub const SOFTWARE: u32 = 1;
    /// Tracepoints.
    pub const TRACEPOINT: u32 = 2;
    /// Raw events of the core PMU (`config` is the model-specific encoding).
    pub const RAW: u32 = 4;
}

/// `PERF_COUNT_SW_*` software event numbers.
pub mod sw {
    /// Every page fault (`PERF_COUNT_SW_PAGE_FAULTS`).
    pub const PAGE_FAULTS: u64 = 2;
    /// Minor faults only.
    pub const PAGE_FAULTS_MIN: u64 = 5;
    /// Major faults only.
    pub const PAGE_FAULTS_MAJ: u64 = 6;
}

/// `PERF_SAMPLE_*` bits of `perf_event_attr.sample_type`.
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12; // not a page size: a perf_event_attr sample bit
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    pub const TRANSACTION: u64 = 1 << 17;
    pub const PHYS_ADDR: u64 = 1 << 19;
}

/// Bits of the flags word of `perf_event_attr` (the C bit-fields, in declaration order).
pub mod flag {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const EXCLUDE_USER: u64 = 1 << 4;
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    pub const EXCLUDE_HV: u64 = 1 << 6;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const ENABLE_ON_EXEC: u64 = 1 << 12; // not a page size: a perf_event_attr flag bit
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    /// `precise_ip` is a two-bit field at bits 15-16.
    pub const PRECISE_IP_SHIFT: u32 = 15;
    pub const MMAP_DATA: u64 = 1 << 17;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const INHERIT_THREAD: u64 = 1 << 35;
}

/// `PERF_RECORD_*` record types in the ring buffer.
pub mod record {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const UNTHROTTLE: u32 = 6;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const LOST_SAMPLES: u32 = 13;
    /// `misc` bit of a COMM record caused by `exec`.
    pub const MISC_COMM_EXEC: u16 = 1 << 13;
    /// `misc` bit of an MMAP2 record carrying a build id instead of device/inode.
    pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
}

/// Size of `struct perf_event_attr` as defined here (`PERF_ATTR_SIZE_VER8`).
pub const ATTR_SIZE: u32 = 136;

/// Byte offsets in the ring buffer's control page (`struct perf_event_mmap_page`).
pub mod mmap_page {
    pub const DATA_HEAD: usize = 1024;
    pub const DATA_TAIL: usize = 1032;
    pub const DATA_OFFSET: usize = 1040;
    pub const DATA_SIZE: usize = 1048;
}

/// `struct perf_event_attr`, laid out exactly as the kernel expects (136 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfEventAttr {
    pub type_: u32,
    pub size: u32,
    pub config: u64,
    /// `sample_period` (or `sample_freq` with [`flag::FREQ`]).
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    /// The bit-fields (`disabled`, `inherit`, ..., see [`flag`]).
    pub flags: u64,
    /// `wakeup_events` (or `wakeup_watermark` in bytes with [`flag::WATERMARK`]).
    pub wakeup: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved_2: u16,
    pub aux_sample_size: u32,
    pub reserved_3: u32,
    pub sig_data: u64,
    pub config3: u64,
}

impl PerfEventAttr {
    /// A zeroed attribute of the given type and config with `size` filled in.
    pub fn new(type_: u32, config: u64) -> Self {
        PerfEventAttr { type_, size: ATTR_SIZE, config, ..Default::default() }
    }

    /// The `precise_ip` field (0..=3).
    pub fn precise_ip(&self) -> u8 {
        ((self.flags >> flag::PRECISE_IP_SHIFT) & 3) as u8
    }

    /// Set the `precise_ip` field (0..=3; larger values are clamped to 3).
    pub fn set_precise_ip(&mut self, level: u8) {
        self.flags &= !(3 << flag::PRECISE_IP_SHIFT);
        self.flags |= u64::from(level.min(3)) << flag::PRECISE_IP_SHIFT;
    }

    /// True when every bit of `bits` is set in the flags word.
    pub fn has(&self, bits: u64) -> bool {
        self.flags & bits == bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layout_matches_the_kernel() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), ATTR_SIZE as usize);
        let a = PerfEventAttr::default();
        let base = &a as *const _ as usize;
        let off = |p: *const u8| p as usize - base;
        assert_eq!(off(&a.config as *const _ as *const u8), 8);
        assert_eq!(off(&a.sample_type as *const _ as *const u8), 24);
        assert_eq!(off(&a.flags as *const _ as *const u8), 40);
        assert_eq!(off(&a.wakeup as *const _ as *const u8), 48);
        assert_eq!(off(&a.config1 as *const _ as *const u8), 56);
        assert_eq!(off(&a.clockid as *const _ as *const u8), 92);
        assert_eq!(off(&a.config3 as *const _ as *const u8), 128);
    }

    #[test]
    fn precise_ip_is_bits_15_and_16() {
        let mut a = PerfEventAttr::new(type_id::RAW, 0x1cd);
        a.set_precise_ip(1);
        assert_eq!(a.flags, 1 << 15);
        a.set_precise_ip(3);
        assert_eq!(a.flags, 3 << 15);
        assert_eq!(a.precise_ip(), 3);
        a.set_precise_ip(9);
        assert_eq!(a.precise_ip(), 3);
    }
}
