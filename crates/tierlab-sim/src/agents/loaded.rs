//! The loaded-latency updater: every `update_interval` it measures each memory node's traffic
//! of the interval that just ended and sets the latency every core sees for the next one
//! ([`crate::hw::loaded`] has the model and its sources).
//!
//! Traffic of a node over an interval, from the hardware's counters:
//! - accesses of every core to the node, split into reads and writes by that core's write
//!   share in the interval (the per-node split of a core's accesses is not counted by the
//!   access path, to keep it as fast as it is; a core whose reads and writes go to different
//!   nodes in different proportions is approximated);
//! - each access that misses the caches (`1 - cost.cache_hit_fraction` of them) reads one
//!   line; a store also writes one back (write-allocate, write-back caches);
//! - page migrations: the copy reads the source node and writes the target node.
//!
//! The driver adds this agent when a node has a `loaded` table. It is deterministic: it runs
//! at fixed simulated times, after every application core reached them.

use crate::error::Result;
use crate::hw::loaded::{NodeLoad, Traffic};
use crate::os::memory::NodeConfig;
use crate::stats::Stats;

use super::{Agent, AgentCtx, Info, Ps, Role};

/// Per-core counter snapshot.
#[derive(Clone, Debug, Default)]
struct CoreSnap {
    accesses: u64,
    writes: u64,
    node_accesses: Vec<u64>,
}

/// The loaded-latency updater (an OS-layer agent).
pub struct LoadedLatencyAgent {
    /// Idle latency `[core node][memory node]`, ns.
    idle: Vec<Vec<f64>>,
    /// The model per node (None: fixed latency).
    nodes: Vec<Option<NodeLoad>>,
    names: Vec<String>,
    interval: Ps,
    next: Ps,
    last: Ps,
    snaps: Vec<CoreSnap>,
    mig_in: Vec<u64>,
    mig_out: Vec<u64>,
    line_bytes: Vec<u64>,
    updates: u64,
    /// Per node: sum of utilization and of factor over updates, and their maximum.
    sum_u: Vec<f64>,
    sum_f: Vec<f64>,
    max_f: Vec<f64>,
    /// Per node: the window's sum of factors and updates (window mean).
    win_f: Vec<f64>,
    win_n: u64,
}

impl LoadedLatencyAgent {
    /// The updater for `nodes` with the idle latency matrix `idle`; `None` when no node has a
    /// loaded-latency model.
    pub fn new(nodes: &[NodeConfig], idle: Vec<Vec<f64>>) -> Option<Self> {
        if nodes.iter().all(|n| n.loaded.is_none()) {
            return None;
        }
        let interval = nodes
            .iter()
            .filter_map(|n| n.loaded.as_ref())
            .map(|l| l.update_interval.ps())
            .min()
            .unwrap_or(Ps::NS);
        // The node's own idle latency (from a core of its own, or any core for CPU-less
        // nodes) sets the curve's scale; the factor multiplies every core's latency to it.
        let models = nodes
            .iter()
            .map(|n| n.loaded.as_ref().map(|l| NodeLoad::new(l, n.latency_ns, n.bandwidth_gbps)))
            .collect::<Vec<_>>();
        let k = nodes.len();
        Some(LoadedLatencyAgent {
            idle,
            line_bytes: nodes.iter().map(|n| n.loaded.as_ref().map_or(0, |l| l.line_bytes)).collect(),
            nodes: models,
            names: nodes.iter().map(|n| n.name.clone()).collect(),
            interval,
            next: interval,
            last: Ps::ZERO,
            snaps: Vec::new(),
            mig_in: vec![0; k],
            mig_out: vec![0; k],
            updates: 0,
            sum_u: vec![0.0; k],
            sum_f: vec![0.0; k],
            max_f: vec![1.0; k],
            win_f: vec![0.0; k],
            win_n: 0,
        })
    }

    fn snapshot(ctx: &AgentCtx) -> Vec<CoreSnap> {
        let m = &ctx.machine;
        (0..m.cores())
            .map(|i| CoreSnap {
                accesses: m.core_counters(i).accesses(),
                writes: m.core_counters(i).writes,
                node_accesses: m.node_accesses(i).to_vec(),
            })
            .collect()
    }

    /// The current factor of each node (1 for nodes without a model).
    pub fn factors(&self) -> Vec<f64> {
        self.nodes.iter().map(|n| n.as_ref().map_or(1.0, |m| m.factor)).collect()
    }

    fn apply(&self, ctx: &mut AgentCtx) {
        let f = self.factors();
        let lat: Vec<Vec<f64>> =
            self.idle.iter().map(|row| row.iter().zip(&f).map(|(l, g)| l * g).collect()).collect();
        ctx.machine.set_memory_latency(&lat);
    }
}

impl Agent for LoadedLatencyAgent {
    fn label(&self) -> &str {
        "loaded-latency"
    }
    fn kind(&self) -> &'static str {
        "loaded-latency"
    }
    fn role(&self) -> Role {
        Role::Os
    }
    fn core(&self) -> usize {
        0
    }
    fn start(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.snaps = Self::snapshot(ctx);
        let m = ctx.machine.migration();
        for n in 0..self.nodes.len() {
            self.mig_in[n] = m.node_in_bytes.get(n).copied().unwrap_or(0);
            self.mig_out[n] = m.node_out_bytes.get(n).copied().unwrap_or(0);
        }
        // Background traffic loads the nodes from the start.
        self.apply(ctx);
        Ok(())
    }
    fn next_event(&self) -> Ps {
        self.next
    }
    fn on_event(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        let now = ctx.now;
        let dt = (now - self.last).ns_f64();
        self.last = now;
        self.next = now + self.interval;
        let chf = ctx.machine.cost().cache_hit_fraction;
        let snaps = Self::snapshot(ctx);
        let k = self.nodes.len();
        let mut reads = vec![0.0f64; k];
        let mut writes = vec![0.0f64; k];
        for (now_c, was) in snaps.iter().zip(&self.snaps) {
            let acc = now_c.accesses - was.accesses;
            if acc == 0 {
                continue;
            }
            let w = (now_c.writes - was.writes) as f64 / acc as f64;
            for n in 0..k {
                let a = (now_c.node_accesses[n] - was.node_accesses[n]) as f64;
                reads[n] += a * (1.0 - w);
                writes[n] += a * w;
            }
        }
        self.snaps = snaps;
        let m = ctx.machine.migration();
        for n in 0..k {
            let line = self.line_bytes[n] as f64 * (1.0 - chf);
            let (mi, mo) =
                (m.node_in_bytes.get(n).copied().unwrap_or(0), m.node_out_bytes.get(n).copied().unwrap_or(0));
            let t = Traffic {
                // Reads and the read-for-ownership of stores, plus migration copies out.
                read: (reads[n] + writes[n]) * line + (mo - self.mig_out[n]) as f64,
                written: writes[n] * line + (mi - self.mig_in[n]) as f64,
            };
            self.mig_in[n] = mi;
            self.mig_out[n] = mo;
            if let Some(model) = self.nodes[n].as_mut() {
                let g = model.update(t, dt);
                self.sum_u[n] += model.u;
                self.sum_f[n] += g;
                self.max_f[n] = self.max_f[n].max(g);
                self.win_f[n] += g;
            }
        }
        self.updates += 1;
        self.win_n += 1;
        self.apply(ctx);
        Ok(())
    }
    fn window_columns(&mut self, _info: &Info) -> Vec<(String, f64)> {
        let mut cols = Vec::new();
        for (n, m) in self.nodes.iter().enumerate() {
            if let Some(m) = m {
                let mean = if self.win_n > 0 { self.win_f[n] / self.win_n as f64 } else { m.factor };
                let idle = self.idle.first().map_or(0.0, |r| r[n]);
                cols.push((format!("node.{}.loaded_latency_ns", self.names[n]), idle * mean));
                cols.push((format!("node.{}.utilization", self.names[n]), m.u));
            }
        }
        self.win_f.iter_mut().for_each(|v| *v = 0.0);
        self.win_n = 0;
        cols
    }
    fn report_stats(&self, _info: &Info, out: &mut Stats) {
        out.set("machine.loaded.updates", self.updates);
        out.set("machine.loaded.update_interval_s", self.interval.secs_f64());
        let n_up = self.updates.max(1) as f64;
        for (n, m) in self.nodes.iter().enumerate() {
            if m.is_some() {
                let p = format!("node.{}.loaded", self.names[n]);
                out.set(format!("{p}.mean_utilization"), self.sum_u[n] / n_up);
                out.set(
                    format!("{p}.mean_factor"),
                    if self.updates == 0 { 1.0 } else { self.sum_f[n] / n_up },
                );
                out.set(format!("{p}.max_factor"), self.max_f[n]);
                let idle = self.idle.first().map_or(0.0, |r| r[n]);
                out.set(
                    format!("{p}.mean_latency_ns"),
                    idle * if self.updates == 0 { 1.0 } else { self.sum_f[n] / n_up },
                );
            }
        }
    }
}
