//! Loaded memory latency: a memory node's access latency as a function of its bandwidth use.
//!
//! A node with a `[machine.nodes.loaded]` table has a **latency curve** `g(u)`: its latency
//! is `idle latency x g(u)`, where `u` is its **utilization** over the last update interval,
//!
//! ```text
//! u = (read bytes / (peak_read_gbps x dt) + written bytes / (peak_write_gbps x dt))
//!     + background_read_gbps / peak_read_gbps + background_write_gbps / peak_write_gbps
//! ```
//!
//! Reads and writes are priced separately through their peak bandwidths (Optane: 39.4 GB/s
//! read, 13.9 GB/s write, Izraelevitz et al. 2019, `reference/loaded-latency.md`); the
//! latency an access pays is the node's loaded read latency (stores retire into the cache,
//! their cost is the bandwidth they take).
//!
//! The machine does not evaluate the curve per access: the access path
//! ([`super::Hardware::access`]) keeps reading its precomputed per-core `cost_to` table. An
//! agent of the OS layer (`agents::loaded`) recomputes that table every `update_interval` of
//! simulated time from the traffic the hardware counted in the interval before (per-core
//! accesses per node, the cores' write share, the migrations' copies), so runs stay
//! deterministic and the hot path keeps its cost.
//!
//! # Curves
//! - `mlc` (default): piecewise-linear interpolation of a measured loaded-latency curve,
//!   Intel MLC `--loaded_latency` on a Xeon Silver 4110 with 12 x DDR4-2666 (read-only, all
//!   threads; the Intel community thread quoted in `reference/loaded-latency.md`), normalized
//!   by its lowest-load latency (81.96 ns) and its highest bandwidth (135,656 MB/s). MLC's
//!   load generators are closed loop, so the curve saturates at 1.59x idle at full
//!   bandwidth; beyond `u = 1` the factor stays there. The same shape is used for CXL and
//!   Optane nodes: no published loaded curve of those was found (UNVERIFIED shape, a
//!   parameter).
//! - `mm1`: open-loop M/M/1, `g(u) = 1 + (c_ns / idle) x u / (1 - u)`, capped at
//!   `max_factor` (the reference's fit: `c` ~ 22 ns over u < 0.55; for stress studies).
//! - `points`: your own `[[u, factor], ...]` (sorted by `u`, factors non-decreasing, the
//!   first at `u = 0` with factor 1).

use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

use crate::units::Duration;

/// Intel MLC loaded-latency run (Xeon Silver 4110, 12 x 32 GB DDR4-2666): (bandwidth MB/s,
/// latency ns) from inject delay 20000 down to 0 (`reference/loaded-latency.md` section 2).
pub const MLC_DDR4: [(f64, f64); 11] = [
    (1_238.0, 81.96),
    (2_584.0, 84.20),
    (4_383.0, 85.56),
    (9_724.0, 87.81),
    (18_355.0, 90.16),
    (29_473.0, 92.29),
    (42_695.0, 94.56),
    (68_358.0, 98.94),
    (131_282.0, 123.71),
    (135_267.0, 129.67),
    (135_656.0, 130.31),
];

/// The shape of a latency curve.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CurveKind {
    /// The MLC DDR4 curve, normalized.
    #[default]
    Mlc,
    /// Open-loop M/M/1 with a cap.
    Mm1,
    /// Explicit points.
    Points,
}
tierlab_core::choice_param!(CurveKind);

/// A node's loaded-latency model (`[machine.nodes.loaded]`).
#[params]
#[derive(Clone, Debug, PartialEq)]
pub struct LoadedLatency {
    /// Peak read bandwidth. Absent: the node's `bandwidth_gbps`.
    #[param(default, range = "(0, 1e6]", unit = "GB/s", assumed = "the node's bandwidth_gbps when absent")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_read_gbps: Option<f64>,
    /// Peak write bandwidth (Optane: 13.9). Absent: the peak read bandwidth.
    #[param(
        default,
        range = "(0, 1e6]",
        unit = "GB/s",
        assumed = "the peak read bandwidth when absent (DRAM reads and writes alike)"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_write_gbps: Option<f64>,
    /// Curve shape: `mlc`, `mm1`, `points`.
    #[param(default)]
    pub curve: CurveKind,
    /// `mm1`: queueing constant.
    #[param(
        default = 22.0,
        range = "[0, 1e9]",
        unit = "ns",
        calibrated = "reference/loaded-latency.md: M/M/1 fit to the MLC curve, best c ~ 22 ns over u < 0.55"
    )]
    pub mm1_c_ns: f64,
    /// `mm1`: largest factor.
    #[param(
        default = 3.0,
        range = "[1, 1e6]",
        assumed = "a cap for stress studies; no source gives one (MLC's closed-loop curve saturates at 1.59)"
    )]
    pub max_factor: f64,
    /// `points`: `[[u, factor], ...]`.
    #[param(default, range = "[0, 1e9]", setting)]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub points: Vec<[f64; 2]>,
    /// Traffic of other tenants (an antagonist, as in Colloid's evaluation), read.
    #[param(default = 0.0, range = "[0, 1e6]", unit = "GB/s", setting)]
    pub background_read_gbps: f64,
    /// Background traffic, written.
    #[param(default = 0.0, range = "[0, 1e6]", unit = "GB/s", setting)]
    pub background_write_gbps: f64,
    /// How often the latency is recomputed from the previous interval's traffic.
    #[param(
        default = Duration(1_000_000),
        assumed = "1 ms: short against policy loops of 10 ms and more, long against accesses"
    )]
    pub update_interval: Duration,
    /// Bytes one memory access moves (a cache line).
    #[param(default = 64, range = "[1, 4096]", unit = "bytes", assumed = "a 64-byte cache line")]
    pub line_bytes: u64,
}

impl LoadedLatency {
    /// Check what the declared ranges do not (the interval, the points' order); `(field
    /// suffix, problem)`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.update_interval.0 == 0 {
            return Err(("update_interval", "must be > 0".into()));
        }
        if self.curve == CurveKind::Points {
            let p = &self.points;
            if p.is_empty() || p[0] != [0.0, 1.0] {
                return Err(("points", "must start with [0.0, 1.0] (idle latency at zero load)".into()));
            }
            for w in p.windows(2) {
                if !(w[1][0] > w[0][0] && w[1][1] >= w[0][1] && w[1][1].is_finite()) {
                    return Err((
                        "points",
                        format!(
                            "{:?} then {:?}: utilizations must increase and factors must not decrease",
                            w[0], w[1]
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The curve as normalized points `(u, factor)`.
    pub fn curve_points(&self) -> Vec<(f64, f64)> {
        match self.curve {
            CurveKind::Mlc => mlc_points(),
            CurveKind::Points => self.points.iter().map(|p| (p[0], p[1])).collect(),
            CurveKind::Mm1 => Vec::new(),
        }
    }
}

/// The MLC curve normalized: `(0, 1)`, then `(bandwidth / max bandwidth, latency / lowest
/// latency)` for every measured point (the lowest-load point has factor 1).
pub fn mlc_points() -> Vec<(f64, f64)> {
    let peak = MLC_DDR4[MLC_DDR4.len() - 1].0;
    let idle = MLC_DDR4[0].1;
    let mut v = vec![(0.0, 1.0)];
    v.extend(MLC_DDR4.iter().map(|&(bw, l)| (bw / peak, l / idle)));
    v
}

/// A node's curve, ready to evaluate.
#[derive(Clone, Debug, PartialEq)]
pub struct Curve {
    points: Vec<(f64, f64)>,
    mm1: Option<(f64, f64)>,
}

impl Curve {
    /// The curve of `cfg` for a node whose idle latency is `idle_ns`.
    pub fn new(cfg: &LoadedLatency, idle_ns: f64) -> Self {
        match cfg.curve {
            CurveKind::Mm1 => {
                Curve { points: Vec::new(), mm1: Some((cfg.mm1_c_ns / idle_ns, cfg.max_factor)) }
            }
            _ => Curve { points: cfg.curve_points(), mm1: None },
        }
    }

    /// The latency factor at utilization `u` (>= 1; exactly 1 at `u = 0`; non-decreasing).
    pub fn factor(&self, u: f64) -> f64 {
        let u = if u.is_finite() { u.max(0.0) } else { f64::INFINITY };
        if let Some((k, cap)) = self.mm1 {
            if u >= 1.0 {
                return cap;
            }
            return (1.0 + k * u / (1.0 - u)).min(cap);
        }
        let p = &self.points;
        if u <= p[0].0 {
            return p[0].1;
        }
        for w in p.windows(2) {
            let ((u0, g0), (u1, g1)) = (w[0], w[1]);
            if u <= u1 {
                return g0 + (g1 - g0) * (u - u0) / (u1 - u0);
            }
        }
        p[p.len() - 1].1
    }
}

/// The traffic a node saw over an interval, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    /// Bytes read from the node.
    pub read: f64,
    /// Bytes written to the node.
    pub written: f64,
}

/// The state of one node's model: its curve, peaks and background, and the last factor.
#[derive(Clone, Debug)]
pub struct NodeLoad {
    /// The curve.
    pub curve: Curve,
    /// Peak read bandwidth, bytes per ns (= GB/s).
    pub peak_read: f64,
    /// Peak write bandwidth, bytes per ns.
    pub peak_write: f64,
    /// Background utilization.
    pub background_u: f64,
    /// Utilization of the last interval.
    pub u: f64,
    /// Latency factor in force.
    pub factor: f64,
}

impl NodeLoad {
    /// The model of a node with idle latency `idle_ns` and bandwidth `bandwidth_gbps`.
    pub fn new(cfg: &LoadedLatency, idle_ns: f64, bandwidth_gbps: f64) -> Self {
        let peak_read = cfg.peak_read_gbps.unwrap_or(bandwidth_gbps);
        let peak_write = cfg.peak_write_gbps.unwrap_or(peak_read);
        let background_u = cfg.background_read_gbps / peak_read + cfg.background_write_gbps / peak_write;
        let curve = Curve::new(cfg, idle_ns);
        let factor = curve.factor(background_u);
        NodeLoad { curve, peak_read, peak_write, background_u, u: background_u, factor }
    }

    /// Utilization of `t` over `dt_ns` (background included).
    pub fn utilization(&self, t: Traffic, dt_ns: f64) -> f64 {
        if dt_ns <= 0.0 {
            return self.background_u;
        }
        t.read / (self.peak_read * dt_ns) + t.written / (self.peak_write * dt_ns) + self.background_u
    }

    /// Take the interval's traffic: the new utilization and factor.
    pub fn update(&mut self, t: Traffic, dt_ns: f64) -> f64 {
        self.u = self.utilization(t, dt_ns);
        self.factor = self.curve.factor(self.u);
        self.factor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_load_is_idle_and_the_curve_rises_monotonically() {
        for cfg in [
            LoadedLatency::default(),
            LoadedLatency { curve: CurveKind::Mm1, ..LoadedLatency::default() },
            LoadedLatency {
                curve: CurveKind::Points,
                points: vec![[0.0, 1.0], [0.5, 1.2], [1.0, 2.0]],
                ..LoadedLatency::default()
            },
        ] {
            cfg.validate().unwrap();
            let c = Curve::new(&cfg, 90.0);
            assert_eq!(c.factor(0.0), 1.0, "{:?}", cfg.curve);
            let mut last = 1.0;
            for i in 0..=300 {
                let u = i as f64 / 200.0;
                let g = c.factor(u);
                assert!(g >= last, "{:?}: g({u}) = {g} < {last}", cfg.curve);
                last = g;
            }
            assert!(last > 1.2, "{:?} rises", cfg.curve);
        }
    }

    #[test]
    fn mlc_curve_reproduces_the_measured_points() {
        let c = Curve::new(&LoadedLatency::default(), 81.96);
        for &(bw, l) in &MLC_DDR4 {
            let g = c.factor(bw / 135_656.0);
            assert!((g * 81.96 - l).abs() < 1e-9, "{bw} MB/s: {} vs {l}", g * 81.96);
        }
        assert!((c.factor(5.0) - 130.31 / 81.96).abs() < 1e-12, "saturates beyond u = 1");
    }

    #[test]
    fn utilization_prices_writes_at_their_peak() {
        let cfg = LoadedLatency {
            peak_read_gbps: Some(39.4),
            peak_write_gbps: Some(13.9),
            ..LoadedLatency::default()
        };
        let n = NodeLoad::new(&cfg, 305.0, 39.4);
        // 1 ms: 3.94 MB read = 10% of the read peak; 1.39 MB written = 10% of the write peak.
        let u = n.utilization(Traffic { read: 3.94e6, written: 1.39e6 }, 1e6);
        assert!((u - 0.2).abs() < 1e-9, "{u}");
        let bg = NodeLoad::new(&LoadedLatency { background_read_gbps: 19.7, ..cfg.clone() }, 305.0, 39.4);
        assert!((bg.u - 0.5).abs() < 1e-12 && bg.factor > 1.0, "background loads an idle node");
    }

    #[test]
    fn bad_points_are_named() {
        let bad = LoadedLatency {
            curve: CurveKind::Points,
            points: vec![[0.0, 1.0], [0.5, 0.9]],
            ..LoadedLatency::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "points");
        let bad =
            LoadedLatency { curve: CurveKind::Points, points: vec![[0.1, 1.0]], ..LoadedLatency::default() };
        assert_eq!(bad.validate().unwrap_err().0, "points");
    }
}
