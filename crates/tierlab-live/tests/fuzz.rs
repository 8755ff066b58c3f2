//! Fuzz harness of the live crate's readers (issue 18): `/proc/PID/maps` and `smaps` text, perf
//! ring buffers and records, lackey's trace, and the mapping tracker fed with anything. Random
//! and mutated inputs from a fixed-seed generator, a bounded number of cases (raise them with
//! `TIERLAB_FUZZ_CASES`): no panic, no overflow, and the tracker's invariants hold.

use tierlab_live::maps::{parse_maps, parse_smaps, Tracker, Vma};
use tierlab_live::{lackey, ring};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
}

fn cases() -> u64 {
    std::env::var("TIERLAB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
}

/// Flip, overwrite, cut or duplicate bytes.
fn mutate(r: &mut Rng, mut b: Vec<u8>) -> Vec<u8> {
    for _ in 0..=r.below(4) {
        if b.is_empty() {
            break;
        }
        let pos = r.below(b.len() as u64) as usize;
        match r.below(4) {
            0 => b[pos] ^= 1 << r.below(8),
            1 => b[pos] = r.next() as u8,
            2 => {
                let end = (pos + 1 + r.below(16) as usize).min(b.len());
                b.drain(pos..end);
            }
            _ => {
                let end = (pos + 1 + r.below(16) as usize).min(b.len());
                let dup: Vec<u8> = b[pos..end].to_vec();
                b.splice(pos..pos, dup);
            }
        }
    }
    b
}

const MAPS: &str = "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234    /usr/bin/prog\n\
7f0000000000-7f0000800000 rw-p 00000000 00:00 0 \n\
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n\
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
const SMAPS: &str = "7f0000000000-7f0020000000 rw-p 00000000 00:00 0 \n\
Size:             524288 kB\nKernelPageSize:        4 kB\nAnonHugePages:    522240 kB\n\
7f1000000000-7f1000400000 rw-s 00000000 00:0f 77   /dev/hugepages/x\nKernelPageSize:     2048 kB\n";

#[test]
fn maps_and_smaps_text() {
    let mut r = Rng(0x5eed_0001);
    for _ in 0..cases() {
        let base = if r.below(2) == 0 { MAPS } else { SMAPS };
        let text = String::from_utf8_lossy(&mutate(&mut r, base.as_bytes().to_vec())).into_owned();
        for v in parse_maps(&text) {
            assert!(v.end > v.start);
        }
        for e in parse_smaps(&text) {
            assert!(e.vma.end > e.vma.start);
        }
        let n = r.below(200) as usize;
        let junk = String::from_utf8_lossy(&r.bytes(n)).into_owned();
        parse_maps(&junk);
        parse_smaps(&junk);
    }
}

#[test]
fn ring_buffers_and_records() {
    let mut r = Rng(0x5eed_0002);
    let trailer = ring::synth::trailer(7, 8, 1000, 1, 42);
    let sample_type = 0x1_0000 | 0x1 | 0x2 | 0x4 | 0x8 | 0x80; // IDENTIFIER | IP | TID | TIME | ADDR | CPU
    let seeds: Vec<Vec<u8>> = vec![
        ring::synth::sample(42, 0x4000, 7, 8, 1000, 0x7f00_0000_1000, 1, None),
        ring::synth::sample(42, 0x4000, 7, 8, 1000, 0x7f00_0000_1000, 1, Some((30, 0x42))),
        ring::synth::lost(42, 3, &trailer),
        ring::synth::throttle(false, 1000, 42, &trailer),
        ring::synth::mmap2(7, 7, 0x7f00_0000_0000, 1 << 20, "/usr/lib/libc.so.6", &trailer),
    ];
    for _ in 0..cases() {
        let seed = r.pick(&seeds).clone();
        let rec = mutate(&mut r, seed);
        let _ = ring::parse_record(&rec, 0x1_0000 | 0x2 | 0x4 | 0x80, |_| Some(sample_type));
        let n = r.below(96) as usize;
        let _ = ring::parse_record(&r.bytes(n), 0x1_0000 | 0x2, |id| (id % 2 == 0).then_some(id));
        // A ring of garbage, read from any position to any head.
        let size = 1usize << (6 + r.below(6));
        let data = r.bytes(size);
        let tail = r.next() % (1 << 40);
        let head = tail + r.below(3 * size as u64);
        let mut scratch = Vec::new();
        let mut seen = 0u64;
        let _ = ring::for_each_record(&data, tail, head, &mut scratch, |rec| {
            seen += rec.len() as u64;
            let _ = ring::parse_record(rec, 0x1_0000 | 0x2 | 0x4, |_| Some(sample_type));
        });
        assert!(seen <= head - tail);
    }
}

#[test]
fn lackey_traces() {
    let mut r = Rng(0x5eed_0003);
    let good = b"I  04001d60,3\n L 1ffefffe48,8\n S 1ffefffe40,8\n M 0404ec48,4\n==123== summary\n".to_vec();
    for _ in 0..cases() {
        let copies = 1 + r.below(4) as usize;
        let text = mutate(&mut r, good.repeat(copies));
        let mut p = lackey::Parser::new();
        let mut out = lackey::Accesses::default();
        let mut pos = 0;
        while pos < text.len() {
            let end = (pos + 1 + r.below(40) as usize).min(text.len());
            if p.feed(&text[pos..end], &mut out).is_err() {
                break;
            }
            pos = end;
        }
        let _ = p.finish(&mut out);
    }
}

#[test]
fn tracker_invariants() {
    let mut r = Rng(0x5eed_0004);
    let names = ["//anon", "[heap]", "[stack]", "/lib.so", "/data"];
    for _ in 0..cases() / 10 {
        let mut t = Tracker::new(*r.pick(&[0u64, 4096, 4 << 20]));
        let mut now = 0u64;
        for _ in 0..40 {
            now += r.below(10);
            let start = r.below(64) * 4096 + if r.below(20) == 0 { u64::MAX - 8 * 4096 } else { 0 };
            let len = (1 + r.below(16)) * 4096;
            match r.below(4) {
                0 | 1 => {
                    let name = *r.pick(&names);
                    t.on_mmap(now, start, len, name)
                }
                2 => {
                    let vmas: Vec<Vma> = (0..r.below(6))
                        .map(|_| {
                            let s = r.below(64) * 4096;
                            Vma {
                                start: s,
                                end: s + (1 + r.below(16)) * 4096,
                                perms: "rw-p".into(),
                                name: r.pick(&names).replace("//anon", "[anon]").to_string(),
                            }
                        })
                        .collect();
                    let mut vmas = vmas;
                    vmas.sort_by_key(|v| v.start);
                    t.on_snapshot(now, &vmas);
                }
                _ => t.on_exec(now),
            }
            // The kept mappings never overlap.
            let live = t.live();
            for w in live.windows(2) {
                assert!(w[0].1 <= w[1].0, "{live:?}");
            }
            for e in t.take_events() {
                assert!(e.length > 0);
                assert!(e.start.checked_add(e.length - 1).is_some(), "{e:?}");
            }
        }
    }
}
