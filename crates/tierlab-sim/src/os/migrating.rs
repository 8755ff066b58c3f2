//! Pages under migration (Linux's migration entries). `migrate_pages` unmaps a page before
//! copying it: its PTE holds a migration entry and the page is locked until the copy is done
//! and the new mapping installed (`remove_migration_ptes`). An access in between faults and
//! waits on the page lock (`migration_entry_wait`). The machine keeps each locked page with
//! the interval of its copy; a page walk that reaches a locked page at a time inside that
//! interval waits until its end (the wait is fault time of the accessing core). The copy's
//! own translation flush makes the next access of every core walk.
//!
//! A transactional copy (NOMAD's) leaves the page mapped and takes no lock.

use std::collections::BTreeMap;

use tierlab_core::PAGE_MASK;

/// The locked pages and the waits they caused.
#[derive(Clone, Debug, Default)]
pub struct Locks {
    /// Start address -> (end address, lock start ps, lock end ps).
    pages: BTreeMap<u64, (u64, u64, u64)>,
    /// The earliest start and the latest end of the locks, ps: a core whose clock is
    /// outside cannot wait (a migration thread ahead of the application locks pages in the
    /// application's future).
    from: u64,
    until: u64,
    /// Accesses that waited for a copy to end.
    pub waits: u64,
    /// Time they waited, ps.
    pub wait_ps: u64,
}

impl Locks {
    /// Whether no page is locked.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Whether a core at `clock_ps` may still have to wait for a lock (the walk must look).
    #[inline(always)]
    pub fn may_wait(&self, clock_ps: u64) -> bool {
        clock_ps < self.until && clock_ps >= self.from
    }

    /// Whether the page of `addr` has a lock that has not ended by `clock_ps` (now or later:
    /// the walk must take the path that waits, [`Locks::on_walk`], which checks the time the
    /// walk reaches the page). Pages without such a lock take the fast walk.
    #[inline]
    pub fn may_block(&self, addr: u64, clock_ps: u64) -> bool {
        if !self.may_wait(clock_ps) {
            return false;
        }
        match self.pages.range(..=(addr & !PAGE_MASK)).next_back() {
            Some((_, &(end, _, until))) => addr < end && clock_ps < until,
            None => false,
        }
    }

    /// Lock the page `[start, start + bytes)` from `from_ps` to `until_ps` (replacing an older
    /// lock of the same page).
    pub fn lock(&mut self, start: u64, bytes: u64, from_ps: u64, until_ps: u64) {
        if until_ps > from_ps {
            if self.pages.is_empty() {
                (self.from, self.until) = (from_ps, until_ps);
            }
            self.pages.insert(start, (start + bytes, from_ps, until_ps));
            self.from = self.from.min(from_ps);
            self.until = self.until.max(until_ps);
        }
    }

    /// A page walk reached `addr` at `clock_ps`: the time to wait for the copy of its page,
    /// ps (0 when it is not locked then).
    #[inline]
    pub fn on_walk(&mut self, addr: u64, clock_ps: u64) -> u64 {
        let Some((_, &(end, from, until))) = self.pages.range(..=(addr & !PAGE_MASK)).next_back() else {
            return 0;
        };
        if addr >= end || clock_ps < from || clock_ps >= until {
            return 0;
        }
        let w = until - clock_ps;
        self.waits += 1;
        self.wait_ps += w;
        w
    }

    /// Forget the locks that ended by `now_ps` (no core can reach them before their end any
    /// more).
    pub fn expire(&mut self, now_ps: u64) {
        self.pages.retain(|_, &mut (_, _, until)| until > now_ps);
        let (mut lo, mut hi) = (u64::MAX, 0);
        for &(_, f, u) in self.pages.values() {
            (lo, hi) = (lo.min(f), hi.max(u));
        }
        (self.from, self.until) = (lo, hi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab_core::PAGE_SIZE;

    #[test]
    fn an_access_during_the_copy_waits_for_its_end() {
        let mut l = Locks::default();
        l.lock(10 * PAGE_SIZE, PAGE_SIZE, 1_000, 5_000);
        assert!(!l.may_wait(500) && l.may_wait(1_000), "a core before the copy cannot wait yet");
        assert!(l.may_block(10 * PAGE_SIZE + 8, 2_000) && !l.may_block(11 * PAGE_SIZE, 2_000));
        assert_eq!(l.on_walk(10 * PAGE_SIZE + 8, 500), 0, "before the copy");
        assert_eq!(l.on_walk(10 * PAGE_SIZE + 8, 2_000), 3_000);
        assert_eq!(l.on_walk(11 * PAGE_SIZE, 2_000), 0, "another page");
        assert_eq!(l.on_walk(10 * PAGE_SIZE, 5_000), 0, "after the copy");
        assert_eq!((l.waits, l.wait_ps), (1, 3_000));
        l.expire(5_000);
        assert!(l.is_empty());
        assert!(!l.may_wait(5_000), "no core can wait past the last lock's end");
    }
}
