//! A replay's synchronisation: the recording's `sync` table (`tierlab trace --cc`) turned
//! into points of each simulated thread's access stream where it arrives at a barrier,
//! acquires or releases, and the simulated times those points were reached.
//!
//! **Rules** (in simulated time: each thread's clock is its core's):
//! - a barrier arrival ([`SyncRole::Arrive`]) waits until every replayed participant of the
//!   same barrier instance has arrived; all leave at the latest arrival. A barrier instance
//!   is `arg` (its participants) consecutive arrivals, in `seq` order, at the same object
//!   and kind (OpenMP: the region; pthread: the barrier's address); arrivals whose count is
//!   unknown (`arg = 0`) do not synchronise;
//! - an acquire ([`SyncRole::Acquire`]) waits for the latest release of the same family and
//!   object recorded before it (`seq` order): the acquirer's clock becomes the later of its
//!   own and that release's. A mutex's lock waits for its previous unlock, a condition
//!   wait's return for the latest signal or broadcast before it, a team thread's start of
//!   an OpenMP region for its fork, a critical section for its previous exit;
//! - a release records its thread's clock.
//!
//! Events of recorded threads that are not replayed (threads without accesses) count in a
//! barrier instance's grouping but are not waited for; an acquire whose release was such a
//! thread's does not wait. A barrier instance holds the arrivals recorded, so one that some
//! participants never reached (a cut trace) lets those that did through. The rules follow
//! the recorded order (a mutex goes to the thread that had it next in the recording), so
//! the replay's waits are deterministic and a consistent table cannot deadlock; on an
//! inconsistent one (edited, or events out of order), when every unfinished thread waits,
//! the waiting point recorded first goes through (`workload.sync_forced` counts them).

use super::Ps;
use std::collections::{BTreeMap, HashMap};
use tierlab_core::{SyncEvent, SyncRole};

/// What a point does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    /// Arrives at barrier instance `.0`.
    Arrive(u32),
    /// Waits for release `.0`.
    Acquire(u32),
    /// Is release `.0`.
    Release(u32),
}

/// One point of a thread's stream.
#[derive(Clone, Copy, Debug)]
struct Point {
    /// Accesses of the thread (in its round) before the point.
    index: u64,
    seq: u64,
    what: What,
}

/// The state of one round (`repeat`) of the replay.
#[derive(Clone, Debug)]
struct Round {
    /// Arrivals so far at each barrier instance, and the latest arrival's time.
    arrived: Vec<u32>,
    latest: Vec<Ps>,
    /// Members of each instance (lowered when a cut recording's barrier is forced through).
    members: Vec<u32>,
    /// When each release was reached (`None`: not yet).
    released: Vec<Option<Ps>>,
}

/// The synchronisation of a replay (one simulated thread per recorded thread).
pub struct Sync {
    points: Vec<Vec<Point>>,
    members: Vec<u32>,
    releases: usize,
    rounds: BTreeMap<u32, Round>,
    /// Per thread: its next point, whether it has arrived at it (a barrier), whether it waits,
    /// has finished, is forced through, and the clock its waits moved it to.
    next: Vec<usize>,
    arrived: Vec<bool>,
    waiting: Vec<bool>,
    done: Vec<bool>,
    forced: Vec<bool>,
    resume: Vec<Ps>,
    /// Applied points, simulated time waited (ps), forced points.
    pub applied: u64,
    pub waited_ps: u128,
    pub forced_points: u64,
}

impl Sync {
    /// The plan for `events` (in `seq` order) of a replay whose simulated thread `i` replays
    /// recorded thread `tids[i]`; `None` when no event concerns a replayed thread.
    pub fn new(events: &[SyncEvent], tids: &[u32]) -> Option<Sync> {
        let thread: HashMap<u32, usize> = tids.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        let mut points: Vec<Vec<Point>> = vec![Vec::new(); tids.len()];
        // Barrier instances: per (kind, object) the open instance and its arrivals so far.
        let mut open: HashMap<(u8, u64), (u32, u64)> = HashMap::new();
        let mut members: Vec<u32> = Vec::new();
        // Releases: per (family, object) the latest release and whether its thread is replayed.
        let mut last: HashMap<(u8, u64), Option<u32>> = HashMap::new();
        let mut releases = 0u32;
        for e in events {
            let t = thread.get(&e.tid).copied();
            let what = match e.kind.role() {
                SyncRole::Arrive => {
                    if e.arg == 0 {
                        continue;
                    }
                    let key = (e.kind as u8, e.object);
                    let slot = open.entry(key).or_insert((u32::MAX, 0));
                    if slot.0 == u32::MAX || slot.1 >= e.arg {
                        *slot = (members.len() as u32, 0);
                        members.push(0);
                    }
                    slot.1 += 1;
                    let g = slot.0;
                    if t.is_some() {
                        members[g as usize] += 1;
                    }
                    What::Arrive(g)
                }
                SyncRole::Acquire(f) => match last.get(&(f, e.object)).copied().flatten() {
                    Some(r) => What::Acquire(r),
                    None => continue,
                },
                SyncRole::Release(f) => {
                    let id = t.map(|_| {
                        releases += 1;
                        releases - 1
                    });
                    last.insert((f, e.object), id);
                    match id {
                        Some(r) => What::Release(r),
                        None => continue,
                    }
                }
            };
            if let Some(t) = t {
                points[t].push(Point { index: e.index, seq: e.seq, what });
            }
        }
        if points.iter().all(|p| p.is_empty()) {
            return None;
        }
        for p in &mut points {
            p.sort_by_key(|p| (p.index, p.seq));
        }
        let n = tids.len();
        Some(Sync {
            points,
            members,
            releases: releases as usize,
            rounds: BTreeMap::new(),
            next: vec![0; n],
            arrived: vec![false; n],
            waiting: vec![false; n],
            done: vec![false; n],
            forced: vec![false; n],
            resume: vec![Ps::ZERO; n],
            applied: 0,
            waited_ps: 0,
            forced_points: 0,
        })
    }

    fn round(&mut self, r: u32) -> &mut Round {
        let (members, releases) = (&self.members, self.releases);
        self.rounds.entry(r).or_insert_with(|| Round {
            arrived: vec![0; members.len()],
            latest: vec![Ps::ZERO; members.len()],
            members: members.clone(),
            released: vec![None; releases],
        })
    }

    /// Recorded points of thread `t` (one round).
    pub fn points_of(&self, t: usize) -> usize {
        self.points[t].len()
    }

    /// The clock thread `t`'s waits have moved it to.
    pub fn resume_at(&self, t: usize) -> Ps {
        self.resume[t]
    }

    /// Thread `t` starts its next round (its points from the first).
    pub fn start_round(&mut self, t: usize) {
        self.next[t] = 0;
        self.arrived[t] = false;
    }

    /// Thread `t` has finished.
    pub fn finish(&mut self, t: usize) {
        self.done[t] = true;
        self.waiting[t] = false;
    }

    /// Forget rounds before `r` (every thread is at `r` or later).
    pub fn drop_rounds_before(&mut self, r: u32) {
        while let Some((&k, _)) = self.rounds.first_key_value() {
            if k >= r {
                break;
            }
            self.rounds.remove(&k);
        }
    }

    /// Whether thread `t`'s current point (in round `r`) lets it go on.
    fn can_go(&mut self, t: usize, r: u32) -> bool {
        let Some(&p) = self.points[t].get(self.next[t]) else { return true };
        if self.forced[t] {
            return true;
        }
        let round = self.round(r);
        match p.what {
            What::Arrive(g) => round.arrived[g as usize] >= round.members[g as usize],
            What::Acquire(id) => round.released[id as usize].is_some(),
            What::Release(_) => true,
        }
    }

    /// Process thread `t`'s points at position `pos` of round `r` (every remaining point
    /// when `at_end`), its clock `now`. `Some(n)`: it goes on and may issue `n` more accesses
    /// before its next point; `None`: it waits.
    pub fn advance(
        &mut self,
        t: usize,
        r: u32,
        pos: u64,
        now: Ps,
        at_end: bool,
        rounds_of: &[u32],
    ) -> Option<u64> {
        loop {
            let Some(&p) = self.points[t].get(self.next[t]) else {
                self.waiting[t] = false;
                return Some(u64::MAX);
            };
            if p.index > pos && !at_end {
                self.waiting[t] = false;
                return Some(p.index - pos);
            }
            let clock = now.max(self.resume[t]);
            let forced = std::mem::take(&mut self.forced[t]);
            self.round(r);
            let round = self.rounds.get_mut(&r).expect("round made");
            let go = match p.what {
                What::Release(id) => {
                    round.released[id as usize] = Some(clock);
                    Some(clock)
                }
                What::Acquire(id) => match round.released[id as usize] {
                    Some(at) => Some(at.max(clock)),
                    None if forced => Some(clock),
                    None => None,
                },
                What::Arrive(g) => {
                    let g = g as usize;
                    if !self.arrived[t] {
                        round.arrived[g] += 1;
                        round.latest[g] = round.latest[g].max(clock);
                        self.arrived[t] = true;
                    }
                    if forced && round.arrived[g] < round.members[g] {
                        round.members[g] = round.arrived[g];
                    }
                    (round.arrived[g] >= round.members[g]).then(|| round.latest[g].max(clock))
                }
            };
            match go {
                Some(at) => {
                    if at > clock {
                        self.waited_ps += u128::from((at - clock).ps());
                    }
                    self.resume[t] = at;
                    self.arrived[t] = false;
                    self.next[t] += 1;
                    self.applied += 1;
                    if forced {
                        self.forced_points += 1;
                    }
                }
                None => {
                    self.waiting[t] = true;
                    if self.deadlocked(t, rounds_of) {
                        let pick = self.first_waiting();
                        self.forced[pick] = true;
                        if pick == t {
                            continue;
                        }
                    }
                    return None;
                }
            }
        }
    }

    /// Every unfinished thread waits at a point that cannot go (`t` included).
    fn deadlocked(&mut self, t: usize, rounds_of: &[u32]) -> bool {
        for (u, &r) in rounds_of.iter().enumerate() {
            if u == t || self.done[u] {
                continue;
            }
            if !self.waiting[u] || self.can_go(u, r) {
                return false;
            }
        }
        true
    }

    /// The waiting thread whose point was recorded first.
    fn first_waiting(&self) -> usize {
        (0..self.points.len())
            .filter(|&u| self.waiting[u] && !self.done[u])
            .min_by_key(|&u| self.points[u].get(self.next[u]).map_or(u64::MAX, |p| p.seq))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::SyncKind;

    fn ev(seq: u64, tid: u32, index: u64, kind: SyncKind, object: u64, arg: u64) -> SyncEvent {
        SyncEvent { time_ns: seq, tid, seq, index, kind, object, arg }
    }

    /// Drive two threads by hand: thread `t` costs `cost[t]` per access.
    fn run(s: &mut Sync, lens: &[u64], cost: &[u64]) -> Vec<Ps> {
        let n = lens.len();
        let mut clock = vec![Ps::ZERO; n];
        let mut pos = vec![0u64; n];
        let mut done = vec![false; n];
        let rounds = vec![0u32; n];
        let mut spins = 0;
        while !done.iter().all(|&d| d) {
            spins += 1;
            assert!(spins < 10_000, "no progress");
            for t in 0..n {
                if done[t] {
                    continue;
                }
                let at_end = pos[t] == lens[t];
                let Some(limit) = s.advance(t, 0, pos[t], clock[t], at_end, &rounds) else { continue };
                clock[t] = clock[t].max(s.resume_at(t));
                if at_end {
                    s.finish(t);
                    done[t] = true;
                    continue;
                }
                let k = limit.min(lens[t] - pos[t]).min(3);
                pos[t] += k;
                clock[t] += Ps::from_ps(k * cost[t]);
            }
        }
        clock
    }

    #[test]
    fn a_barrier_holds_every_participant_until_the_last() {
        // Two threads, barrier after 10 accesses each; thread 1 is 5x slower.
        let e = [ev(0, 7, 10, SyncKind::OmpBarrier, 1, 2), ev(1, 8, 10, SyncKind::OmpBarrier, 1, 2)];
        let mut s = Sync::new(&e, &[7, 8]).unwrap();
        let c = run(&mut s, &[20, 20], &[1, 5]);
        // Thread 0 leaves the barrier at 50 (thread 1's arrival) and ends at 60.
        assert_eq!(c, vec![Ps::from_ps(60), Ps::from_ps(100)]);
        assert_eq!(s.waited_ps, 40);
        assert_eq!(s.applied, 2);
    }

    #[test]
    fn a_lock_waits_for_the_previous_release() {
        // Thread 7 holds the mutex over its accesses 0..10 and unlocks; thread 8 locks at 0.
        let e = [
            ev(0, 7, 0, SyncKind::MutexLock, 9, 0),
            ev(1, 7, 10, SyncKind::MutexUnlock, 9, 0),
            ev(2, 8, 0, SyncKind::MutexLock, 9, 0),
            ev(3, 8, 4, SyncKind::MutexUnlock, 9, 0),
        ];
        let mut s = Sync::new(&e, &[7, 8]).unwrap();
        let c = run(&mut s, &[10, 4], &[2, 1]);
        assert_eq!(c, vec![Ps::from_ps(20), Ps::from_ps(24)]);
    }

    #[test]
    fn a_cut_barrier_waits_for_the_arrivals_recorded() {
        // Thread 8 never arrives at the second barrier (the trace was cut): its instance
        // holds the one arrival recorded, which goes through.
        let e = [
            ev(0, 7, 2, SyncKind::Barrier, 1, 2),
            ev(1, 8, 2, SyncKind::Barrier, 1, 2),
            ev(2, 7, 4, SyncKind::Barrier, 1, 2),
        ];
        let mut s = Sync::new(&e, &[7, 8]).unwrap();
        let c = run(&mut s, &[6, 2], &[1, 1]);
        assert_eq!(c[0], Ps::from_ps(6));
        assert_eq!((s.applied, s.forced_points), (3, 0));
    }

    #[test]
    fn a_cycle_of_waits_is_broken_at_the_first_recorded() {
        // An inconsistent table: each thread first acquires what the other releases later.
        let e = [
            ev(0, 8, 5, SyncKind::MutexUnlock, 1, 0),
            ev(1, 7, 5, SyncKind::MutexUnlock, 2, 0),
            ev(2, 7, 0, SyncKind::MutexLock, 1, 0),
            ev(3, 8, 0, SyncKind::MutexLock, 2, 0),
        ];
        let mut s = Sync::new(&e, &[7, 8]).unwrap();
        let c = run(&mut s, &[10, 10], &[1, 1]);
        assert_eq!(s.forced_points, 1);
        assert_eq!(s.applied, 4);
        // Thread 7 went first; thread 8 waited for its unlock at 5.
        assert_eq!(c, vec![Ps::from_ps(10), Ps::from_ps(15)]);
    }
}
