//! `graph`: graph kernels in the style of the GAP Benchmark Suite's `pr` and `bc` (Beamer,
//! Asanović, Patterson, "The GAP Benchmark Suite", arXiv 1508.03619) over a Kronecker graph.
//!
//! # The graph
//! GAP's Kronecker generator (`-g SCALE -k DEGREE`, the Graph500 generator): `2^scale`
//! vertices and `degree * 2^scale` edges, each edge placing its endpoints by `scale` recursive
//! choices of a quadrant of the adjacency matrix with probabilities `a`, `b`, `c` and
//! `1 - a - b - c` (GAP's 0.57, 0.19, 0.19); the vertex ids are then shuffled by a seeded
//! random permutation, as GAP does, so the high-degree vertices lie anywhere in the id space.
//! The graph is undirected (GAP's `kron` benchmark graph is): every edge is stored in both
//! directions in one CSR (`offsets`: `V + 1` entries, `neighbours`: the arcs), each vertex's
//! neighbours ascending, with self-loops and duplicate edges dropped as GAP's builder
//! (`SquishGraph`) does, so the CSR holds at most `2 * degree * 2^scale` arcs. The graph is
//! built once (two passes over the regenerated edges, never an edge list) and held while the
//! run lasts: about `4 * arcs + 8 * V` bytes of host memory (scale 22: ~0.5 GiB).
//!
//! # The kernels' accesses
//! Threads split the vertices in contiguous blocks (`pr`) or each BFS level's frontier in
//! contiguous slices (`bc`); they do not wait for each other at phase or level ends (as
//! `spmv`'s threads do not: no barrier cost is modelled).
//!
//! `pr` (GAP's `pr.cc`, pull direction), per iteration and vertex `u` of the thread's block:
//! first `contrib[u] = scores[u] / degree(u)` (load `scores[u]`, `offsets[u]`,
//! `offsets[u + 1]`, store `contrib[u]`: 4 accesses), then, per vertex `u` again, the sum
//! of the neighbours' contributions (load `offsets[u]`, `offsets[u + 1]`, per arc `p` load
//! `neighbours[p]` and `contrib[neighbours[p]]`, then load and store `scores[u]`). An
//! iteration is `8 V + 2 E` accesses (`E` = arcs). `contrib` is read at random, weighted by
//! degree: the pages holding high-degree vertices' entries are the hot ones.
//!
//! `bc` (GAP's `bc.cc`, Brandes' algorithm), per source (a seeded random vertex with
//! neighbours, as GAP's `SourcePicker`): each thread resets its block's `depths`,
//! `path_counts` and `deltas` entries and its share of the successor bitmap `succ` (one bit
//! per arc); then the BFS forward, level by level: per frontier vertex `u` load `queue[i]`,
//! `offsets[u]`, `offsets[u + 1]`, `path_counts[u]`, and per arc `p` to `v` load
//! `neighbours[p]` and `depths[v]`; if this arc discovers `v` (the first arc to reach it in
//! queue order) store `depths[v]` and `queue[tail]`; if `v` is one level deeper, load and
//! store `succ`'s word of `p` and `path_counts[v]`. Then the dependencies backward, deepest
//! level first: per vertex `u` load `queue[i]`, `offsets[u]`, `offsets[u + 1]`,
//! `path_counts[u]`, per arc load `neighbours[p]` and `succ`'s word of `p`, and for a
//! successor `v` load `path_counts[v]` and `deltas[v]`; then store `deltas[u]` and load and
//! store `scores[u]`. After the last source each thread normalises its block of `scores`
//! (load to find the maximum, then load and store). The BFS is computed on the host (depths,
//! queue order, discovering arcs), one source at a time.
//!
//! Placement: the arrays are mapped in the order above (`offsets`, `neighbours`, `scores`,
//! then the kernel's) and populated (GAP builds the graph before the kernel runs); `node = N`
//! populates them on memory node N instead of by the placement rule.

use super::{
    check_threads, Access, AddressSpace, BuildCtx, MapOptions, Ps, Step, Workload, WorkloadParams,
    WorkloadShared,
};
use crate::error::{Result, SimError};
use crate::rng::{derive, splitmix64, Rng};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use tierlab_core::param::params;

/// The kernel a `graph` workload runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernel {
    /// PageRank, pull direction (GAP `pr`).
    #[default]
    Pr,
    /// Betweenness centrality, Brandes' algorithm from a few sources (GAP `bc`).
    Bc,
}

tierlab_core::choice_param!(Kernel);

/// Parameters of the `graph` workload.
#[params]
#[derive(Clone, Debug)]
pub struct GraphParams {
    /// `2^scale` vertices (GAP's `-g`; its benchmark graph `kron` is scale 27, which needs
    /// ~17 GiB of host memory here: tierlab's default keeps it at 2^20 vertices).
    #[param(default = 20, range = "[1, 26]", unit = "log2 vertices", setting)]
    pub scale: u32,
    /// Edges generated per vertex (GAP's `-k`, default 16; the graph is undirected, so a
    /// vertex has ~2 * degree neighbours before duplicates are dropped).
    #[param(
        default = 16,
        range = "[1, 64]",
        unit = "edges per vertex",
        sourced = "GAP: -k 16 (arXiv 1508.03619)"
    )]
    pub degree: u32,
    /// The kernel: `"pr"` (PageRank) or `"bc"` (betweenness centrality).
    #[param(default)]
    pub kernel: Kernel,
    /// PageRank iterations (GAP's `pr` stops after at most 20 or when the error falls
    /// under 1e-4; here always this many); 0 = until the scenario's duration.
    #[param(
        default = 20,
        range = "[0, 281474976710656]",
        unit = "iterations",
        sourced = "GAP pr.cc: at most 20 iterations"
    )]
    pub iterations: u64,
    /// Betweenness-centrality sources (GAP's benchmark runs `bc` from 4); 0 = new sources
    /// until the scenario's duration.
    #[param(
        default = 4,
        range = "[0, 281474976710656]",
        unit = "sources",
        sourced = "GAP benchmark: bc from 4 sources (arXiv 1508.03619)"
    )]
    pub sources: u64,
    /// Kronecker quadrant probability `a` (top left).
    #[param(
        default = 0.57,
        range = "[0, 1]",
        unit = "probability",
        sourced = "GAP / Graph500 Kronecker generator: A = 0.57"
    )]
    pub a: f64,
    /// Kronecker quadrant probability `b` (top right).
    #[param(
        default = 0.19,
        range = "[0, 1]",
        unit = "probability",
        sourced = "GAP / Graph500 Kronecker generator: B = 0.19"
    )]
    pub b: f64,
    /// Kronecker quadrant probability `c` (bottom left); `d = 1 - a - b - c`.
    #[param(
        default = 0.19,
        range = "[0, 1]",
        unit = "probability",
        sourced = "GAP / Graph500 Kronecker generator: C = 0.19"
    )]
    pub c: f64,
    /// Bytes of a vertex id (`neighbours`, `queue` and `depths` entries; GAP's `NodeID` is
    /// `int32_t`).
    #[param(default = 4, range = "[1, 64]", unit = "bytes", sourced = "GAP benchmark.h: NodeID = int32_t")]
    pub id_bytes: u64,
    /// Bytes of an `offsets` entry (GAP's CSR index holds 64-bit pointers).
    #[param(
        default = 8,
        range = "[1, 64]",
        unit = "bytes",
        sourced = "GAP graph.h: CSR index of 8-byte pointers"
    )]
    pub offset_bytes: u64,
    /// Bytes of a score (`scores`, `contrib`, `deltas`; GAP's `ScoreT` is `float`).
    #[param(default = 4, range = "[1, 64]", unit = "bytes", sourced = "GAP pr.cc, bc.cc: ScoreT = float")]
    pub score_bytes: u64,
    /// Bytes of a shortest-path count (`bc`'s `path_counts`; GAP's `CountT` is `double`).
    #[param(default = 8, range = "[1, 64]", unit = "bytes", sourced = "GAP bc.cc: CountT = double")]
    pub count_bytes: u64,
    /// Populate every array on this memory node (e.g. the slow tier, as `numactl --membind`
    /// would); absent = by the placement rule.
    #[param(default, range = "[0, 255]", unit = "node number", setting)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u8>,
}

/// Target accesses per batch.
const BATCH: usize = 16_384;

/// An undirected graph in CSR form (both directions of every edge).
#[derive(Clone, Debug, Default)]
pub struct Csr {
    /// `offsets[u]..offsets[u + 1]`: the arcs of `u`.
    pub offsets: Vec<u64>,
    /// Arc targets, ascending per vertex.
    pub neighbours: Vec<u32>,
}

impl Csr {
    /// Vertices.
    pub fn vertices(&self) -> u64 {
        self.offsets.len() as u64 - 1
    }
    /// Arcs (twice the distinct undirected edges).
    pub fn arcs(&self) -> u64 {
        self.neighbours.len() as u64
    }
    /// Neighbours of `u`.
    pub fn adj(&self, u: u32) -> &[u32] {
        &self.neighbours[self.offsets[u as usize] as usize..self.offsets[u as usize + 1] as usize]
    }

    /// Build from the undirected edges that `each(f)` passes to `f` (it is called twice and
    /// must pass the same edges): both directions stored, self-loops and duplicates dropped.
    pub fn build(n: u32, each: impl Fn(&mut dyn FnMut(u32, u32))) -> Csr {
        let n = n as usize;
        let mut fill = vec![0u64; n + 1];
        each(&mut |u, v| {
            if u != v {
                fill[u as usize + 1] += 1;
                fill[v as usize + 1] += 1;
            }
        });
        for i in 0..n {
            fill[i + 1] += fill[i];
        }
        let start = fill.clone();
        let mut nb = vec![0u32; fill[n] as usize];
        each(&mut |u, v| {
            if u != v {
                nb[fill[u as usize] as usize] = v;
                fill[u as usize] += 1;
                nb[fill[v as usize] as usize] = u;
                fill[v as usize] += 1;
            }
        });
        drop(fill);
        // Sort and deduplicate each vertex's list, compacting in place.
        let mut offsets = vec![0u64; n + 1];
        let mut w = 0usize;
        for u in 0..n {
            let (lo, hi) = (start[u] as usize, start[u + 1] as usize);
            nb[lo..hi].sort_unstable();
            let mut last = None;
            for i in lo..hi {
                let v = nb[i];
                if last != Some(v) {
                    nb[w] = v;
                    w += 1;
                    last = Some(v);
                }
            }
            offsets[u + 1] = w as u64;
        }
        nb.truncate(w);
        nb.shrink_to_fit();
        Csr { offsets, neighbours: nb }
    }
}

/// GAP's Kronecker generator: `degree << scale` edges, endpoints by `scale` quadrant choices
/// (probabilities `a`, `b`, `c`, `1 - a - b - c`), ids shuffled by a seeded permutation.
/// Edge `i` comes from a hash of `key` and `i`, so the edges can be regenerated.
pub struct Kronecker {
    scale: u32,
    edges: u64,
    /// Thresholds of a 32-bit draw: `a`, `a + b`, `a + b + c`.
    ta: u64,
    tab: u64,
    tabc: u64,
    perm: Vec<u32>,
    key: u64,
}

impl Kronecker {
    /// The generator of `degree << scale` edges.
    pub fn new(scale: u32, degree: u32, abc: (f64, f64, f64), key: u64) -> Kronecker {
        let n = 1u32 << scale;
        let t = |p: f64| (p.clamp(0.0, 1.0) * 4_294_967_296.0).min(u32::MAX as f64 + 1.0) as u64;
        let mut perm: Vec<u32> = (0..n).collect();
        let mut rng = Rng::new(derive(key, "permutation", 0));
        for i in (1..n as usize).rev() {
            perm.swap(i, rng.below(i as u64 + 1) as usize);
        }
        Kronecker {
            scale,
            edges: (degree as u64) << scale,
            ta: t(abc.0),
            tab: t(abc.0 + abc.1),
            tabc: t(abc.0 + abc.1 + abc.2),
            perm,
            key,
        }
    }

    /// Pass every edge to `f`, in order.
    pub fn each(&self, f: &mut dyn FnMut(u32, u32)) {
        for i in 0..self.edges {
            let mut h = self.key ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let (mut src, mut dst) = (0u32, 0u32);
            let mut bits = 0u64;
            for d in 0..self.scale {
                if d % 2 == 0 {
                    bits = splitmix64(&mut h);
                }
                let r = (bits >> (32 * (d % 2))) & 0xFFFF_FFFF;
                src <<= 1;
                dst <<= 1;
                if r < self.tab {
                    dst += (r >= self.ta) as u32;
                } else {
                    src += 1;
                    dst += (r >= self.tabc) as u32;
                }
            }
            f(self.perm[src as usize], self.perm[dst as usize]);
        }
    }

    /// The graph: [`Csr::build`] over the edges.
    pub fn csr(&self) -> Csr {
        Csr::build(self.perm.len() as u32, |f| self.each(f))
    }
}

/// One BFS of Brandes' forward phase, as the serial order of GAP's `PBFS` sees it.
#[derive(Clone, Debug)]
pub struct Bfs {
    /// Depth of each vertex (`u32::MAX`: unreached).
    pub depth: Vec<u32>,
    /// Vertices in queue order (the source first).
    pub queue: Vec<u32>,
    /// `queue[levels[d]..levels[d + 1]]`: the vertices at depth `d`.
    pub levels: Vec<usize>,
    /// The arc that discovered each vertex (`u64::MAX`: the source or unreached).
    pub parent_arc: Vec<u64>,
    /// Position of each vertex in `queue`.
    pub qpos: Vec<u32>,
}

impl Bfs {
    /// BFS from `src`.
    pub fn run(g: &Csr, src: u32) -> Bfs {
        let n = g.vertices() as usize;
        let mut depth = vec![u32::MAX; n];
        let mut parent_arc = vec![u64::MAX; n];
        let mut qpos = vec![u32::MAX; n];
        let mut queue = vec![src];
        depth[src as usize] = 0;
        qpos[src as usize] = 0;
        let mut levels = vec![0];
        let mut i = 0;
        while i < queue.len() {
            let end = queue.len();
            levels.push(end);
            while i < end {
                let u = queue[i];
                let d = depth[u as usize] + 1;
                for p in g.offsets[u as usize]..g.offsets[u as usize + 1] {
                    let v = g.neighbours[p as usize] as usize;
                    if depth[v] == u32::MAX {
                        depth[v] = d;
                        parent_arc[v] = p;
                        qpos[v] = queue.len() as u32;
                        queue.push(v as u32);
                    }
                }
                i += 1;
            }
        }
        Bfs { depth, queue, levels, parent_arc, qpos }
    }

    /// Number of levels (the source's is level 0).
    pub fn depths(&self) -> usize {
        self.levels.len() - 1
    }
}

#[derive(Default, Clone, Copy)]
struct Arrays {
    offsets: u64,
    neighbours: u64,
    scores: u64,
    /// `pr`: outgoing contributions.
    contrib: u64,
    depths: u64,
    path_counts: u64,
    deltas: u64,
    succ: u64,
    queue: u64,
    id: u64,
    off: u64,
    score: u64,
    count: u64,
}

/// Where a thread is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Stage {
    /// `pr`: contributions; `bc`: resetting the arrays.
    #[default]
    First,
    /// `pr`: the pull sums; `bc`: the forward BFS.
    Second,
    /// `bc`: the backward accumulation.
    Backward,
    /// `bc`: the final normalisation.
    Normalise,
}

#[derive(Default)]
struct ThreadState {
    /// The thread's vertex block.
    lo: u64,
    hi: u64,
    stage: Stage,
    /// Position: a vertex (a queue index in the BFS).
    i: u64,
    /// End of the current range of `i`.
    end: u64,
    /// `bc`: current level.
    level: usize,
    /// Next arc inside the current vertex (`None`: the vertex's head is not issued yet).
    arc: Option<u64>,
    /// Iterations (`pr`) or sources (`bc`) completed.
    done: u64,
    issued: u64,
    finished: bool,
}

/// The `graph` workload.
pub struct Graph {
    p: GraphConfig,
    g: Csr,
    arr: Arrays,
    st: Vec<ThreadState>,
    /// `bc`: the BFS of each source reached by some thread (dropped once every thread is
    /// past it), with its source index.
    bfs: Vec<(u64, Bfs)>,
    sources_rng: Rng,
    /// `bc`: the sources picked so far.
    picked: Vec<u32>,
    visited: u64,
    discarded: u64,
}

impl WorkloadParams for GraphConfig {
    fn build(&self, ctx: &BuildCtx) -> Result<Box<dyn Workload>> {
        let f = &ctx.scenario_file;
        check_threads("graph", self.shared.threads, ctx)?;
        if !(1..=26).contains(&self.scale) {
            return Err(SimError::config(
                f,
                "workload.scale",
                format!("must be 1 to 26, got {}", self.scale),
            ));
        }
        if !(1..=64).contains(&self.degree) {
            return Err(SimError::config(
                f,
                "workload.degree",
                format!("must be 1 to 64, got {}", self.degree),
            ));
        }
        if ((2 * self.degree as u64) << self.scale) > u32::MAX as u64 {
            return Err(SimError::config(
                f,
                "workload.degree",
                format!(
                    "2 * degree * 2^scale arcs must stay under 2^32 (scale {}, degree {})",
                    self.scale, self.degree
                ),
            ));
        }
        for (name, v) in [("a", self.a), ("b", self.b), ("c", self.c)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(SimError::config(
                    f,
                    format!("workload.{name}"),
                    format!("must be in [0, 1], got {v}"),
                ));
            }
        }
        if self.a + self.b + self.c > 1.0 + 1e-9 {
            return Err(SimError::config(
                f,
                "workload.c",
                format!("a + b + c must be at most 1 (d = 1 - a - b - c), got {}", self.a + self.b + self.c),
            ));
        }
        for (name, v) in [
            ("id_bytes", self.id_bytes),
            ("offset_bytes", self.offset_bytes),
            ("score_bytes", self.score_bytes),
            ("count_bytes", self.count_bytes),
        ] {
            if !(1..=64).contains(&v) {
                return Err(SimError::config(
                    f,
                    format!("workload.{name}"),
                    format!("must be 1 to 64, got {v}"),
                ));
            }
        }
        if self.node.is_some() && !self.shared.populate {
            return Err(SimError::config(
                f,
                "workload.node",
                "`node` places populated memory: set populate = true",
            ));
        }
        let (field, runs) = match self.kernel {
            Kernel::Pr => ("iterations", self.iterations),
            Kernel::Bc => ("sources", self.sources),
        };
        if runs == 0 && ctx.duration == Ps::ZERO {
            return Err(SimError::config(
                f,
                format!("workload.{field}"),
                format!("{field} = 0 runs until the scenario's duration, but the scenario sets none"),
            ));
        }
        let n = 1u64 << self.scale;
        let t = self.shared.threads as u64;
        if n < t {
            return Err(SimError::config(
                f,
                "workload.threads",
                format!("{n} vertices cannot be split among {t} threads"),
            ));
        }
        let g = Kronecker::new(
            self.scale,
            self.degree,
            (self.a, self.b, self.c),
            derive(ctx.seed, "workload.graph", 0),
        )
        .csr();
        let st = (0..t)
            .map(|i| {
                let lo = (n as u128 * i as u128 / t as u128) as u64;
                let hi = (n as u128 * (i + 1) as u128 / t as u128) as u64;
                ThreadState { lo, hi, i: lo, end: hi, ..ThreadState::default() }
            })
            .collect();
        let arr = Arrays {
            id: self.id_bytes,
            off: self.offset_bytes,
            score: self.score_bytes,
            count: self.count_bytes,
            ..Arrays::default()
        };
        Ok(Box::new(Graph {
            p: self.clone(),
            g,
            arr,
            st,
            bfs: Vec::new(),
            sources_rng: Rng::derived(ctx.seed, "workload.graph.sources", 0),
            picked: Vec::new(),
            visited: 0,
            discarded: 0,
        }))
    }
}

impl Graph {
    /// The BFS of source number `s`, computed when first needed.
    fn bfs_of(&mut self, s: u64) -> usize {
        if let Some(k) = self.bfs.iter().position(|(i, _)| *i == s) {
            return k;
        }
        while self.picked.len() as u64 <= s {
            // GAP's SourcePicker: a random vertex, again while it has no neighbours.
            let n = self.g.vertices();
            let src = loop {
                let v = self.sources_rng.below(n) as u32;
                if !self.g.adj(v).is_empty() {
                    break v;
                }
            };
            self.picked.push(src);
        }
        let b = Bfs::run(&self.g, self.picked[s as usize]);
        self.visited += b.queue.len() as u64;
        self.bfs.push((s, b));
        self.bfs.len() - 1
    }

    /// Drop the BFS every thread is past.
    fn drop_finished_bfs(&mut self) {
        let min = self.st.iter().filter(|s| !s.finished).map(|s| s.done).min().unwrap_or(u64::MAX);
        self.bfs.retain(|(i, _)| *i >= min);
    }

    fn next_pr(&mut self, t: usize, out: &mut Vec<Access>) -> Step {
        let a = self.arr;
        let g = &self.g;
        let s = &mut self.st[t];
        let start = out.len();
        while out.len() - start < BATCH {
            if s.i == s.hi {
                s.i = s.lo;
                if s.stage == Stage::First {
                    s.stage = Stage::Second;
                } else {
                    s.stage = Stage::First;
                    s.done += 1;
                    if self.p.iterations > 0 && s.done >= self.p.iterations {
                        s.finished = true;
                        return Step::Done;
                    }
                }
                continue;
            }
            let u = s.i;
            if s.stage == Stage::First {
                let hi = s.hi.min(u + ((BATCH - (out.len() - start)) / 4).max(1) as u64);
                for u in u..hi {
                    out.push(Access::read(a.scores + u * a.score));
                    out.push(Access::read(a.offsets + u * a.off));
                    out.push(Access::read(a.offsets + (u + 1) * a.off));
                    out.push(Access::write(a.contrib + u * a.score));
                }
                s.i = hi;
                continue;
            }
            let (p0, p1) = (g.offsets[u as usize], g.offsets[u as usize + 1]);
            let mut p = match s.arc {
                Some(p) => p,
                None => {
                    out.push(Access::read(a.offsets + u * a.off));
                    out.push(Access::read(a.offsets + (u + 1) * a.off));
                    p0
                }
            };
            let stop = p1.min(p + ((BATCH.saturating_sub(out.len() - start)) / 2).max(1) as u64);
            while p < stop {
                let v = g.neighbours[p as usize] as u64;
                out.push(Access::read(a.neighbours + p * a.id));
                out.push(Access::read(a.contrib + v * a.score));
                p += 1;
            }
            if p < p1 {
                s.arc = Some(p);
                continue;
            }
            s.arc = None;
            out.push(Access::read(a.scores + u * a.score));
            out.push(Access::write(a.scores + u * a.score));
            s.i += 1;
        }
        Step::Continue
    }

    fn next_bc(&mut self, t: usize, out: &mut Vec<Access>) -> Step {
        let a = self.arr;
        let threads = self.st.len();
        let start = out.len();
        while out.len() - start < BATCH {
            let stage = self.st[t].stage;
            match stage {
                Stage::First => {
                    let s = &mut self.st[t];
                    let hi = s.hi.min(s.i + ((BATCH - (out.len() - start)) / 3).max(1) as u64);
                    for v in s.i..hi {
                        out.push(Access::write(a.depths + v * a.id));
                        out.push(Access::write(a.path_counts + v * a.count));
                        out.push(Access::write(a.deltas + v * a.score));
                    }
                    s.i = hi;
                    if s.i == s.hi {
                        // The block's words of the successor bitmap.
                        let (w0, w1) =
                            (self.g.offsets[s.lo as usize] / 64, self.g.offsets[s.hi as usize].div_ceil(64));
                        out.extend((w0..w1).map(|w| Access::write(a.succ + w * 8)));
                        let done = s.done;
                        let k = self.bfs_of(done);
                        let b = &self.bfs[k].1;
                        if t == 0 {
                            // The source: depth 0, one path, first in the queue.
                            let src = b.queue[0] as u64;
                            out.push(Access::write(a.depths + src * a.id));
                            out.push(Access::write(a.path_counts + src * a.count));
                            out.push(Access::write(a.queue));
                        }
                        let s = &mut self.st[t];
                        s.stage = Stage::Second;
                        s.level = 0;
                        (s.i, s.end) = slice(b, 0, t, threads);
                    }
                }
                Stage::Second | Stage::Backward => {
                    let done = self.st[t].done;
                    let k = self.bfs_of(done);
                    let b = &self.bfs[k].1;
                    let g = &self.g;
                    let s = &mut self.st[t];
                    if s.i == s.end {
                        if stage == Stage::Second {
                            if s.level + 1 < b.depths() {
                                s.level += 1;
                            } else {
                                s.stage = Stage::Backward;
                            }
                        } else if s.level > 0 {
                            s.level -= 1;
                        } else {
                            s.done += 1;
                            s.i = s.lo;
                            s.stage = Stage::First;
                            if self.p.sources > 0 && s.done >= self.p.sources {
                                s.stage = Stage::Normalise;
                                s.end = 0;
                            }
                            self.drop_finished_bfs();
                            continue;
                        }
                        (s.i, s.end) = slice(b, s.level, t, threads);
                        continue;
                    }
                    let u = b.queue[s.i as usize] as u64;
                    let (p0, p1) = (g.offsets[u as usize], g.offsets[u as usize + 1]);
                    let mut p = match s.arc {
                        Some(p) => p,
                        None => {
                            out.push(Access::read(a.queue + s.i * a.id));
                            out.push(Access::read(a.offsets + u * a.off));
                            out.push(Access::read(a.offsets + (u + 1) * a.off));
                            out.push(Access::read(a.path_counts + u * a.count));
                            p0
                        }
                    };
                    let next = b.depth[u as usize] + 1;
                    let stop = p1.min(p + ((BATCH.saturating_sub(out.len() - start)) / 4).max(1) as u64);
                    while p < stop {
                        let v = g.neighbours[p as usize] as u64;
                        out.push(Access::read(a.neighbours + p * a.id));
                        let succ = b.depth[v as usize] == next;
                        if stage == Stage::Second {
                            out.push(Access::read(a.depths + v * a.id));
                            if b.parent_arc[v as usize] == p {
                                out.push(Access::write(a.depths + v * a.id));
                                out.push(Access::write(a.queue + b.qpos[v as usize] as u64 * a.id));
                            }
                            if succ {
                                out.push(Access::read(a.succ + p / 64 * 8));
                                out.push(Access::write(a.succ + p / 64 * 8));
                                out.push(Access::read(a.path_counts + v * a.count));
                                out.push(Access::write(a.path_counts + v * a.count));
                            }
                        } else {
                            out.push(Access::read(a.succ + p / 64 * 8));
                            if succ {
                                out.push(Access::read(a.path_counts + v * a.count));
                                out.push(Access::read(a.deltas + v * a.score));
                            }
                        }
                        p += 1;
                    }
                    if p < p1 {
                        s.arc = Some(p);
                        continue;
                    }
                    s.arc = None;
                    if stage == Stage::Backward {
                        out.push(Access::write(a.deltas + u * a.score));
                        out.push(Access::read(a.scores + u * a.score));
                        out.push(Access::write(a.scores + u * a.score));
                    }
                    s.i += 1;
                }
                Stage::Normalise => {
                    let s = &mut self.st[t];
                    // end = 0: the pass finding the maximum; 1: the division.
                    if s.i == s.hi {
                        if s.end == 0 {
                            s.end = 1;
                            s.i = s.lo;
                            continue;
                        }
                        s.finished = true;
                        self.drop_finished_bfs();
                        return Step::Done;
                    }
                    let hi = s.hi.min(s.i + ((BATCH - (out.len() - start)) / 2).max(1) as u64);
                    for v in s.i..hi {
                        out.push(Access::read(a.scores + v * a.score));
                        if s.end == 1 {
                            out.push(Access::write(a.scores + v * a.score));
                        }
                    }
                    s.i = hi;
                }
            }
        }
        Step::Continue
    }
}

/// Thread `t`'s slice of level `d`'s queue range.
fn slice(b: &Bfs, d: usize, t: usize, threads: usize) -> (u64, u64) {
    let (lo, hi) = (b.levels[d] as u64, b.levels[d + 1] as u64);
    let n = hi - lo;
    (lo + n * t as u64 / threads as u64, lo + n * (t as u64 + 1) / threads as u64)
}

impl Workload for Graph {
    fn threads(&self) -> usize {
        self.p.shared.threads
    }

    fn setup(&mut self, mem: &mut dyn AddressSpace) -> Result<()> {
        let n = self.g.vertices();
        let e = self.g.arcs();
        let (ps, node) = (self.p.shared.page_size, self.p.node);
        let pop = self.p.shared.populate && node.is_none();
        let mut map = |name: &str, len: u64| -> Result<u64> {
            let a = mem.mmap(
                len.max(1),
                MapOptions { name: name.into(), page_size: ps, populate: pop, thread: 0 },
            )?;
            if let Some(n) = node {
                mem.populate_on(a, len.max(1), n)?;
            }
            Ok(a)
        };
        let a = &mut self.arr;
        a.offsets = map("offsets", (n + 1) * a.off)?;
        a.neighbours = map("neighbours", e * a.id)?;
        a.scores = map("scores", n * a.score)?;
        match self.p.kernel {
            Kernel::Pr => a.contrib = map("contrib", n * a.score)?,
            Kernel::Bc => {
                a.depths = map("depths", n * a.id)?;
                a.path_counts = map("path_counts", n * a.count)?;
                a.deltas = map("deltas", n * a.score)?;
                a.succ = map("succ", e.div_ceil(64) * 8)?;
                a.queue = map("queue", n * a.id)?;
            }
        }
        Ok(())
    }

    fn next_batch(
        &mut self,
        t: usize,
        _now: Ps,
        out: &mut Vec<Access>,
        _mem: &mut dyn AddressSpace,
    ) -> Result<Step> {
        let start = out.len();
        out.reserve(BATCH + 16);
        let step = match self.p.kernel {
            Kernel::Pr => self.next_pr(t, out),
            Kernel::Bc => self.next_bc(t, out),
        };
        self.st[t].issued += (out.len() - start) as u64;
        Ok(step)
    }

    fn discard(&mut self, _t: usize, unexecuted: &[Access]) {
        self.discarded += unexecuted.len() as u64;
    }

    fn report_stats(&self, out: &mut Stats) {
        out.set("workload.vertices", self.g.vertices());
        out.set("workload.arcs", self.g.arcs());
        let max_deg =
            (0..self.g.vertices() as usize).map(|u| self.g.offsets[u + 1] - self.g.offsets[u]).max();
        out.set("workload.max_degree", max_deg.unwrap_or(0));
        out.set("workload.accesses", self.st.iter().map(|s| s.issued).sum::<u64>() - self.discarded);
        let done = self.st.iter().map(|s| s.done).min().unwrap_or(0);
        match self.p.kernel {
            Kernel::Pr => out.set("workload.iterations_completed", done),
            Kernel::Bc => {
                out.set("workload.sources_completed", done);
                out.set("workload.bfs_visited", self.visited);
            }
        }
    }
}

/// `GraphParams` with the workload parameters every kind shares ([`WorkloadShared`]).
pub type GraphConfig = crate::params::With<WorkloadShared, GraphParams>;

impl crate::params::SharedDefaults<WorkloadShared> for GraphParams {
    fn shared_defaults() -> WorkloadShared {
        // GAP builds the graph before the kernel runs: every array is in memory.
        WorkloadShared { populate: true, ..WorkloadShared::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::super::masim::testing::*;
    use super::*;
    use std::collections::BTreeSet;

    fn ctx() -> BuildCtx {
        BuildCtx {
            seed: 3,
            scenario_file: "s.toml".into(),
            cores: 4,
            duration: Ps::ZERO,
            ..Default::default()
        }
    }

    #[test]
    fn kronecker_csr_is_the_deduplicated_symmetric_edge_set() {
        let (scale, degree) = (8u32, 8u32);
        let gen = Kronecker::new(scale, degree, (0.57, 0.19, 0.19), 11);
        let g = gen.csr();
        // The edge set, deduplicated independently.
        let mut set = BTreeSet::new();
        let mut generated = 0u64;
        gen.each(&mut |u, v| {
            generated += 1;
            if u != v {
                set.insert((u, v));
                set.insert((v, u));
            }
        });
        assert_eq!(generated, (degree as u64) << scale);
        assert_eq!(g.arcs(), set.len() as u64);
        assert!(g.arcs() < 2 * generated, "Kronecker graphs repeat edges: some are dropped");
        let mut from_csr = BTreeSet::new();
        for u in 0..g.vertices() as u32 {
            let adj = g.adj(u);
            assert!(adj.windows(2).all(|w| w[0] < w[1]), "ascending, no duplicates");
            assert!(!adj.contains(&u), "no self-loop");
            from_csr.extend(adj.iter().map(|&v| (u, v)));
        }
        assert_eq!(from_csr, set);
        // Skewed: the top vertices hold far more than their share of the arcs, unlike with
        // uniform quadrants (a = b = c = d = 1/4).
        let top = |g: &Csr| (0..g.vertices() as u32).map(|u| g.adj(u).len() as u64).max().unwrap();
        let uniform = Kronecker::new(scale, degree, (0.25, 0.25, 0.25), 11).csr();
        assert!(top(&g) > 3 * top(&uniform), "{} vs {}", top(&g), top(&uniform));
    }

    #[test]
    fn bfs_of_a_hand_checked_graph() {
        // 0-1, 0-2, 1-3, 2-3, 3-4, plus a separate component 5-6 and the isolated 7.
        let edges = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (5, 6), (1, 0)];
        let g = Csr::build(8, |f| {
            for &(u, v) in &edges {
                f(u, v);
            }
        });
        assert_eq!(g.arcs(), 12);
        let b = Bfs::run(&g, 0);
        assert_eq!(b.queue, [0, 1, 2, 3, 4]);
        assert_eq!(b.levels, [0, 1, 3, 4, 5]);
        assert_eq!(&b.depth[..5], [0, 1, 1, 2, 3]);
        assert!(b.depth[5..].iter().all(|&d| d == u32::MAX));
        // 3 is discovered through 1 (queue order), by the arc 1 -> 3.
        let arc13 = g.offsets[1] + g.adj(1).iter().position(|&v| v == 3).unwrap() as u64;
        assert_eq!(b.parent_arc[3], arc13);
        let b5 = Bfs::run(&g, 5);
        assert_eq!(b5.queue, [5, 6]);
    }

    /// A driven workload, its mappings, per mapping (name, reads, writes), and its accesses.
    type Driven = (Box<dyn Workload>, MockSpace, Vec<(String, u64, u64)>, Vec<Access>);

    /// Drive a workload to its end.
    fn run(toml_text: &str) -> Driven {
        let p: GraphConfig = toml::from_str(toml_text).unwrap();
        let mut w = p.build(&ctx()).unwrap();
        let mut mem = MockSpace::new();
        w.setup(&mut mem).unwrap();
        let mut accs = Vec::new();
        drive(w.as_mut(), &mut mem, Ps::NS, Ps::ZERO, |_, _, a| accs.push(*a));
        let mut per = Vec::new();
        for m in &mem.maps {
            let inside = |a: &&Access| a.addr >= m.start && a.addr < m.start + m.len;
            let r = accs.iter().filter(inside).filter(|a| !a.is_write()).count() as u64;
            let wr = accs.iter().filter(inside).filter(|a| a.is_write()).count() as u64;
            per.push((m.opts.name.clone(), r, wr));
        }
        assert!(accs.iter().all(|a| mem.contains(a.addr)));
        (w, mem, per, accs)
    }

    #[test]
    fn pr_accesses_per_iteration() {
        let (w, _mem, per, accs) = run("scale = 9\ndegree = 4\niterations = 3\nthreads = 3");
        let mut s = Stats::new();
        w.report_stats(&mut s);
        let (v, e) = (s.get_u64("workload.vertices"), s.get_u64("workload.arcs"));
        assert_eq!(v, 512);
        assert_eq!(accs.len() as u64, 3 * (8 * v + 2 * e));
        assert_eq!(s.get_u64("workload.accesses"), accs.len() as u64);
        assert_eq!(s.get_u64("workload.iterations_completed"), 3);
        let get = |n: &str| per.iter().find(|p| p.0 == n).map(|p| (p.1, p.2)).unwrap();
        assert_eq!(get("neighbours"), (3 * e, 0));
        assert_eq!(get("contrib"), (3 * e, 3 * v));
        assert_eq!(get("scores"), (6 * v, 3 * v));
        assert_eq!(get("offsets"), (12 * v, 0));
    }

    #[test]
    fn bc_follows_brandes() {
        let (w, mem, per, accs) = run("scale = 9\ndegree = 4\nkernel = \"bc\"\nsources = 2\nthreads = 2");
        let mut s = Stats::new();
        w.report_stats(&mut s);
        let (v, e) = (s.get_u64("workload.vertices"), s.get_u64("workload.arcs"));
        assert_eq!(s.get_u64("workload.sources_completed"), 2);
        let visited = s.get_u64("workload.bfs_visited");
        assert!(visited > 2 && visited <= 2 * v);
        let get = |n: &str| per.iter().find(|p| p.0 == n).map(|p| (p.1, p.2)).unwrap();
        // Each reached vertex is written into the queue once per source (the source by the
        // reset), its depth once at reset and once when discovered.
        assert_eq!(get("queue").1, visited);
        assert_eq!(get("depths").1, 2 * v + visited);
        // Each reached vertex's scores: one load and store per source, plus the
        // normalisation's two loads and a store.
        assert_eq!(get("scores"), (visited + 2 * v, visited + v));
        // A reached vertex's arcs are scanned twice per source (forward and backward).
        assert_eq!(get("neighbours").0 % 2, 0);
        assert!(get("neighbours").0 <= 4 * e);
        // The successor bitmap is written only by the reset and the forward phase.
        let succ = mem.find("succ");
        assert!(accs.iter().any(|a| a.is_write() && a.addr >= succ.start && a.addr < succ.start + succ.len));
        assert_eq!(accs.len() as u64, s.get_u64("workload.accesses"));
    }

    #[test]
    fn deterministic_and_errors() {
        let text = "scale = 7\ndegree = 4\niterations = 1";
        let (_, _, _, a1) = run(text);
        let (_, _, _, a2) = run(text);
        assert_eq!(
            a1.iter().map(|a| a.addr).collect::<Vec<_>>(),
            a2.iter().map(|a| a.addr).collect::<Vec<_>>()
        );
        let c = ctx();
        let bad = |t: &str| toml::from_str::<GraphConfig>(t).unwrap().build(&c).err().unwrap().to_string();
        assert!(bad("scale = 0").contains("workload.scale"));
        assert!(bad("a = 0.6\nb = 0.3\nc = 0.3").contains("workload.c"));
        assert!(bad("iterations = 0").contains("workload.iterations"));
        assert!(bad("kernel = \"bc\"\nsources = 0").contains("workload.sources"));
        assert!(bad("scale = 4\nid_bytes = 0").contains("workload.id_bytes"));
        assert!(bad("scale = 1\nthreads = 4").contains("workload.threads"));
        assert!(toml::from_str::<GraphConfig>("kernel = \"sssp\"").is_err());
    }
}
