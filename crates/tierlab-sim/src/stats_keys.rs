//! The catalogue of what a run publishes: every statistic of the stats registry
//! ([`STATS`]) and every column of the time series ([`COLUMNS`]), each with its unit and a
//! one-line description.
//!
//! The catalogue only declares: components still set their statistics themselves (in their
//! `report_stats` and `window_columns`). The Python module `tierlab.stats_keys` is generated
//! from it (`tools/gen_python.py`: a constant per key, a function per family), and the tests
//! check that every key of a set of built-in runs matches an entry (`tests/test_generated.py`),
//! so Python never reads a key the engine does not declare here.
//!
//! A key is a dotted name; a part written `{name}` stands for any one part (a technique's
//! label, a node's name, a core's index): `telemetry.{label}.cpu_seconds` is the family of
//! `telemetry.DAMON.cpu_seconds`, `telemetry.PEBS.cpu_seconds`, ... No two entries match the
//! same name.

/// One statistic or time-series column, or a family of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatKey {
    /// The dotted name; a `{name}` part stands for any one part.
    pub key: &'static str,
    /// The unit, one of [`UNITS`].
    pub unit: &'static str,
    /// What it is, in one line.
    pub about: &'static str,
}

const fn k(key: &'static str, unit: &'static str, about: &'static str) -> StatKey {
    StatKey { key, unit, about }
}

/// The units an entry may give, and what each means.
pub const UNITS: &[(&str, &str)] = &[
    ("count", "a number of events or things"),
    ("bytes", "bytes"),
    ("pages", "pages (of the page size the entry names)"),
    ("s", "seconds (simulated time unless the entry says host)"),
    ("ms", "milliseconds"),
    ("us", "microseconds"),
    ("ns", "nanoseconds"),
    ("fraction", "a share from 0 to 1"),
    ("percent", "a share from 0 to 100"),
    ("factor", "a ratio, 1 meaning unchanged"),
    ("per s", "events per simulated second"),
    ("per ms", "events per simulated millisecond"),
    ("MB/s", "megabytes per simulated second"),
    ("bp", "basis points (1/10,000)"),
    ("index", "a number naming a core, a node, a window or a bin"),
    ("flag", "0 or 1"),
    ("label", "a name (a string)"),
];

/// Every statistic a run may publish (`Stats`, `stats_flat` in Python).
pub const STATS: &[StatKey] = &[
    // -- the run (driver) --
    k("run.simulated_seconds", "s", "simulated time the run covered"),
    k("run.windows", "count", "windows of the time series"),
    k("run.seed", "count", "the seed the run used"),
    k("run.scenario", "label", "the scenario's name"),
    k("run.interrupted", "flag", "1 when the caller stopped the run early"),
    k("run.threads", "count", "application threads (simulated cores running the workload)"),
    k("run.ground_truth_accesses", "count", "accesses counted by the ground truth"),
    k("run.app_seconds", "s", "the application's run time: its slowest thread's clock"),
    // -- the machine: cores, TLBs, page walks (os/mod.rs) --
    k("machine.cores", "count", "simulated cores"),
    k("machine.accesses", "count", "memory accesses of every core"),
    k("machine.reads", "count", "loads of every core"),
    k("machine.writes", "count", "stores of every core"),
    k("machine.tlb.l1_hits", "count", "accesses translated by an L1 TLB"),
    k("machine.tlb.l2_hits", "count", "L1 TLB misses translated by the L2 TLB"),
    k("machine.tlb.misses", "count", "accesses that missed every TLB level (a page walk)"),
    k("machine.tlb.local_invalidations", "count", "TLB entries a core invalidated for itself"),
    k("machine.tlb.local_flushes", "count", "whole-TLB flushes a core made for itself"),
    k("machine.tlb.remote_invalidations", "count", "invalidations received from other cores"),
    k("machine.tlb.shootdowns_sent", "count", "TLB shootdowns sent to other cores"),
    k("machine.walks", "count", "page walks"),
    k("machine.walk_levels", "count", "page-table levels read by all page walks"),
    k("machine.walk.levels_1", "count", "page walks that read one level"),
    k("machine.walk.levels_2", "count", "page walks that read two levels"),
    k("machine.walk.levels_3", "count", "page walks that read three levels"),
    k("machine.walk.levels_4", "count", "page walks that read four levels"),
    k("machine.psc.hits.pml4", "count", "paging-structure cache hits on a PML4 entry"),
    k("machine.psc.hits.pdpte", "count", "paging-structure cache hits on a PDPT entry"),
    k("machine.psc.hits.pde", "count", "paging-structure cache hits on a page-directory entry"),
    k("machine.psc.misses", "count", "page walks the paging-structure caches did not shorten"),
    k("machine.psc.flushes", "count", "flushes of the paging-structure caches"),
    k("machine.psc.fault_invalidations", "count", "paging-structure cache entries a fault invalidated"),
    k("machine.page_faults", "count", "page faults of every core"),
    k("machine.dirty_assists", "count", "stores that set a Dirty bit through a clean translation"),
    k("machine.cache.hits", "count", "accesses that hit the modelled cache"),
    k("machine.cache.misses", "count", "accesses that missed the modelled cache"),
    k("machine.cache.load_misses", "count", "loads that missed the modelled cache"),
    k("machine.time.access_s", "s", "time of every core in accesses (all cores summed)"),
    k("machine.time.fault_s", "s", "time of every core in page faults (all cores summed)"),
    k("machine.time.tlb_maintenance_s", "s", "time in TLB invalidations and shootdowns"),
    k("machine.time.background_s", "s", "time cores spent on background work (scanners, agents)"),
    k("machine.time.migration_copy_s", "s", "time spent copying migrated pages"),
    k("machine.mappings", "count", "mappings in the address space at the end"),
    k("machine.migrations", "count", "pages migrated between nodes"),
    k("machine.migration.huge_pages", "count", "huge pages among the migrated pages"),
    k("machine.migration.promotions", "count", "migrations to a faster tier"),
    k("machine.migration.demotions", "count", "migrations to a slower tier"),
    k("machine.migration.bytes", "bytes", "bytes migrated"),
    k("machine.migration.shootdowns", "count", "TLB shootdowns made for migrations"),
    k(
        "machine.migration.lock_waits",
        "count",
        "accesses that waited for the copy of a page under migration (unmapped, locked)",
    ),
    k("machine.time.migration_wait_s", "s", "time accesses waited for pages under migration"),
    k("machine.hint.faults", "count", "NUMA hint faults taken"),
    k("machine.hint.protected_pages", "pages", "pages the hint-fault scanner protected"),
    k("machine.hint.still_protected", "pages", "pages still protected at the end"),
    k("machine.swap.pageouts", "count", "pages written to swap"),
    k("machine.swap.refaults", "count", "faults on pages that were in swap"),
    k("machine.swap.pages_out", "pages", "pages in swap at the end"),
    k("machine.pagetable.present_4k", "pages", "4 KiB pages mapped in the radix page tables"),
    k("machine.pagetable.present_2m", "pages", "2 MiB pages mapped in the radix page tables"),
    k("machine.pagetable.upper_tables", "count", "page tables above the PTE level"),
    k("machine.pagetable.pte_tables", "count", "PTE tables"),
    k("machine.pagetable.materialized", "count", "bulk-populated PMDs later made into PTE tables"),
    k("machine.loaded.updates", "count", "updates of the loaded-latency model"),
    k("machine.loaded.update_interval_s", "s", "time between updates of the loaded-latency model"),
    k("machine.core.{core}.accesses", "count", "memory accesses of a core"),
    k("machine.core.{core}.tlb_misses", "count", "TLB misses of a core"),
    k("machine.core.{core}.page_faults", "count", "page faults of a core"),
    k("machine.core.{core}.remote_invalidations", "count", "invalidations a core received"),
    k("machine.core.{core}.time_s", "s", "a core's clock at the end"),
    k("machine.core.{core}.node", "label", "the node a core belongs to"),
    // -- memory nodes --
    k("node.{node}.accesses", "count", "accesses served by a node"),
    k("node.{node}.resident_bytes", "bytes", "bytes resident on a node at the end"),
    k("node.{node}.capacity_bytes", "bytes", "a node's capacity"),
    k("node.{node}.allocated_bytes", "bytes", "bytes ever allocated on a node"),
    k("node.{node}.tier", "index", "a node's tier (0 the fastest)"),
    k("node.{node}.loaded.mean_utilization", "fraction", "a node's mean bandwidth utilization"),
    k("node.{node}.loaded.mean_factor", "factor", "a node's mean latency over its idle latency"),
    k("node.{node}.loaded.max_factor", "factor", "a node's largest latency over its idle latency"),
    k("node.{node}.loaded.mean_latency_ns", "ns", "a node's mean loaded latency"),
    // -- the hierarchical memory backend (os/backend/hier.rs) and its replacement policy --
    k("hmem.policy", "label", "the replacement policy"),
    k("hmem.page_tables", "label", "per-core (PSPT) or shared page tables"),
    k("hmem.page_size", "label", "the page size of the fast memory"),
    k("hmem.page_bytes", "bytes", "bytes per page of the fast memory"),
    k("hmem.footprint_bytes", "bytes", "the workload's footprint"),
    k("hmem.fast_memory_bytes", "bytes", "the fast memory's size"),
    k("hmem.fast_memory_fraction", "fraction", "the fast memory's size over the footprint"),
    k("hmem.frames", "pages", "page frames of the fast memory"),
    k("hmem.resident_pages", "pages", "pages in the fast memory at the end"),
    k("hmem.evictions", "count", "pages evicted from the fast memory"),
    k("hmem.writebacks", "count", "dirty evictions written back"),
    k("hmem.bytes_in", "bytes", "bytes brought in over the link"),
    k("hmem.bytes_out", "bytes", "bytes written back over the link"),
    k("hmem.data_moved_bytes", "bytes", "bytes moved over the link, both ways"),
    k("hmem.link_busy_s", "s", "time the link was busy, both directions"),
    k("hmem.link_wait_s", "s", "time faults waited for the link"),
    k("hmem.pte_reads", "count", "page-table entries read to test Accessed bits"),
    k("hmem.accessed_bits_cleared", "count", "Accessed bits found set and cleared"),
    k("hmem.invalidations.eviction", "count", "remote TLB invalidations caused by evictions"),
    k("hmem.invalidations.accessed_bit", "count", "remote invalidations caused by Accessed-bit clears"),
    k("hmem.scanner.runs", "count", "runs of the scanner"),
    k("hmem.scanner.busy_s", "s", "busy time of the scanner's core"),
    k("hmem.scanner.threads", "count", "scanner threads"),
    k("hmem.policy_prefetches", "pages", "pages brought in by a placement or tiering policy"),
    k("hmem.policy_evictions", "pages", "pages evicted by a placement or tiering policy"),
    k("hmem.core.{core}.page_faults", "count", "page faults of an application core"),
    k("hmem.core.{core}.remote_tlb_invalidations", "count", "remote invalidations a core received"),
    k("hmem.core.{core}.dtlb_misses", "count", "data TLB misses of a core"),
    k("hmem.core.{core}.pte_copy_faults", "count", "faults of a core that only copied a PTE (PSPT)"),
    k("hmem.core.{core}.data_moved_bytes", "bytes", "bytes a core's faults moved over the link"),
    k("hmem.core.{core}.fault_time_s", "s", "time a core spent in faults"),
    k("hmem.per_core.page_faults", "count", "page faults per application core (mean)"),
    k("hmem.per_core.remote_tlb_invalidations", "count", "remote invalidations per core (mean)"),
    k("hmem.per_core.dtlb_misses", "count", "data TLB misses per application core (mean)"),
    k("hmem.per_core.pte_copy_faults", "count", "PTE-copy faults per application core (mean)"),
    k("hmem.per_core.data_moved_bytes", "bytes", "bytes moved per application core (mean)"),
    k("hmem.per_core.fault_time_s", "s", "time in faults per application core (mean)"),
    k("hmem.per_core.time_s", "s", "clock per application core at the end (mean)"),
    k("hmem.per_core.zero_fill_faults", "count", "zero-fill faults per application core (mean)"),
    k("hmem.run_time_s", "s", "the application's run time: its slowest core's clock"),
    k("hmem.coremap.{cores}", "pages", "pages mapped by exactly this many cores"),
    k("hmem.touched_pages", "pages", "pages ever touched"),
    k("hmem.fifo.resident_pages", "pages", "FIFO: pages in its queue"),
    k("hmem.lru-exact.resident_pages", "pages", "exact LRU: pages on its list"),
    k("hmem.clock.second_chances", "count", "CLOCK: referenced pages given a second chance"),
    k("hmem.lru.inactive_ratio", "factor", "LRU: the target active over inactive ratio"),
    k("hmem.lru.scans", "count", "LRU: scans run"),
    k("hmem.lru.scanned", "pages", "LRU: inactive pages examined by scans"),
    k("hmem.lru.deactivated", "pages", "LRU: active pages deactivated by scans"),
    k("hmem.lru.active_rotated", "pages", "LRU: referenced active pages rotated back"),
    k("hmem.lru.activated", "pages", "LRU: pages moved to the active list by scans"),
    k("hmem.lru.rotated", "pages", "LRU: referenced-once pages given one more trip"),
    k("hmem.lru.refault_activated", "pages", "LRU: refaulting pages activated at fault time"),
    k("hmem.lru.evicted_active", "pages", "LRU: victims taken from the active list"),
    k("hmem.lru.deactivated_in_reclaim", "pages", "LRU: active pages deactivated by reclaim"),
    k("hmem.lru.active_pages", "pages", "LRU: pages on the active list at the end"),
    k("hmem.lru.inactive_pages", "pages", "LRU: pages on the inactive list at the end"),
    k("hmem.cmcp.p", "fraction", "CMCP: the fraction of prioritized pages"),
    k("hmem.cmcp.aging_every_evictions", "count", "CMCP: evictions between ageing steps (0: none)"),
    k("hmem.cmcp.prioritized", "count", "CMCP: pages placed into the priority group"),
    k("hmem.cmcp.displaced", "count", "CMCP: priority pages pushed back to FIFO"),
    k("hmem.cmcp.aged_out", "count", "CMCP: pages that aged out of the priority group"),
    k("hmem.cmcp.aging_steps", "count", "CMCP: ageing steps"),
    k("hmem.cmcp.evicted_from_priority", "count", "CMCP: victims taken from the priority group"),
    k("hmem.cmcp.priority_pages", "pages", "CMCP: pages in the priority group at the end"),
    k("hmem.cmcp.fifo_pages", "pages", "CMCP: pages in the FIFO list at the end"),
    // -- telemetry techniques (agents/telemetry), by label --
    k("telemetry.{label}.kind", "label", "the technique's kind"),
    k("telemetry.{label}.cpu_seconds", "s", "CPU time of the technique (its core and interrupts)"),
    k("telemetry.{label}.core", "index", "the core the technique runs on"),
    k("telemetry.{label}.app_cpu_seconds", "s", "CPU time the technique took from the application"),
    k("telemetry.{label}.mean_precision", "fraction", "mean precision of its hot sets"),
    k("telemetry.{label}.mean_recall", "fraction", "mean recall of its hot sets"),
    k("telemetry.{label}.time_to_precision", "s", "when its precision first reached the target"),
    k("telemetry.{label}.time_to_recall", "s", "when its recall first reached the target"),
    k("telemetry.{label}.nr_regions", "count", "region-based: regions at the end"),
    k("telemetry.{label}.aggregations", "count", "region-based: aggregation intervals"),
    k("telemetry.{label}.ops_updates", "count", "region-based: updates of the monitored ranges"),
    k("telemetry.{label}.samples_checked", "count", "region-based: region samples checked"),
    k("telemetry.{label}.entries_checked", "count", "region-based: page-table entries read"),
    k("telemetry.{label}.entries_prepared", "count", "region-based: entries whose bit was cleared"),
    k("telemetry.{label}.checks_reused", "count", "region-based: checks answered by an earlier read"),
    k("telemetry.{label}.sampling_interval_s", "s", "region-based: the sampling interval at the end"),
    k("telemetry.{label}.aggregation_interval_s", "s", "region-based: the aggregation interval"),
    k("telemetry.{label}.interval_tunings", "count", "region-based: auto-tunings of the intervals"),
    k("telemetry.{label}.hot_threshold", "count", "region-based: accesses that make a region hot"),
    k("telemetry.{label}.huge_page_samples", "count", "DAMON: samples that landed in a huge page"),
    k("telemetry.{label}.variant", "label", "Telescope: bounded or flex"),
    k("telemetry.{label}.entries_checked_pgd", "count", "Telescope: PGD entries read"),
    k("telemetry.{label}.entries_checked_pud", "count", "Telescope: PUD entries read"),
    k("telemetry.{label}.entries_checked_pmd", "count", "Telescope: PMD entries read"),
    k("telemetry.{label}.entries_checked_pte", "count", "Telescope: PTE entries read"),
    k("telemetry.{label}.damos.schemes", "count", "DAMOS: schemes"),
    k("telemetry.{label}.damos.inactive_checks", "count", "DAMOS: checks of schemes not active"),
    k("telemetry.{label}.damos.{scheme}.action", "label", "DAMOS: a scheme's action"),
    k("telemetry.{label}.damos.{scheme}.nr_tried", "count", "DAMOS: regions a scheme tried"),
    k("telemetry.{label}.damos.{scheme}.sz_tried", "bytes", "DAMOS: bytes a scheme tried"),
    k("telemetry.{label}.damos.{scheme}.nr_applied", "count", "DAMOS: regions a scheme applied to"),
    k("telemetry.{label}.damos.{scheme}.sz_applied", "bytes", "DAMOS: bytes a scheme applied to"),
    k("telemetry.{label}.damos.{scheme}.sz_ops_filter_passed", "bytes", "DAMOS: bytes past filters"),
    k("telemetry.{label}.damos.{scheme}.qt_exceeds", "count", "DAMOS: times a scheme's quota ran out"),
    k("telemetry.{label}.damos.{scheme}.esz_bytes", "bytes", "DAMOS: a scheme's effective quota"),
    k("telemetry.{label}.damos.{scheme}.goal_score_bp", "bp", "DAMOS: a scheme's last goal score"),
    k("telemetry.{label}.driver", "label", "PEBS: the driver model"),
    k("telemetry.{label}.assumed_costs", "label", "PEBS: costs assumed, not sourced (none)"),
    k("telemetry.{label}.samples", "count", "PEBS: records delivered"),
    k("telemetry.{label}.interrupts", "count", "PEBS: interrupts taken"),
    k("telemetry.{label}.drains", "count", "PEBS: buffer drains"),
    k("telemetry.{label}.period", "count", "PEBS: the sampling period (events) at the end"),
    k("telemetry.{label}.period_adjustments", "count", "PEBS: changes of the period"),
    k("telemetry.{label}.buffer_records", "count", "PEBS: records the buffer holds"),
    k("telemetry.{label}.threshold_records", "count", "PEBS: records that raise the interrupt"),
    k("telemetry.{label}.mean_samples_per_drain", "count", "PEBS: records per drain (mean)"),
    k("telemetry.{label}.pages_seen", "pages", "PEBS: distinct pages sampled"),
    k("telemetry.{label}.interrupt_ns", "ns", "PEBS: the cost of one interrupt"),
    k("telemetry.{label}.drain_ns_per_record", "ns", "PEBS: the cost of draining one record"),
    k("telemetry.{label}.assist_ns", "ns", "PEBS: the cost of one assist (writing a record)"),
    k("telemetry.{label}.polled_records", "count", "PEBS: records a poller read"),
    k("telemetry.{label}.poller_seconds", "s", "PEBS: the poller's busy time"),
    k("telemetry.{label}.extra_interrupts_per_record", "count", "PEBS: extra interrupts per record"),
    k("telemetry.{label}.interrupt_seconds", "s", "PEBS: time in the interrupt handler"),
    k("telemetry.{label}.assist_seconds", "s", "PEBS: time in assists"),
    k("telemetry.{label}.lost", "count", "PEBS: records lost to a full buffer"),
    k("telemetry.{label}.throttles", "count", "PEBS: times a core was throttled"),
    k("telemetry.{label}.rate_lowerings", "count", "PEBS: times perf lowered the interrupt limit"),
    k("telemetry.{label}.max_samples_per_tick", "count", "PEBS: interrupts allowed per tick at the end"),
    k("telemetry.{label}.passes", "count", "PTE scan: passes over the page tables"),
    k("telemetry.{label}.ptes_scanned", "count", "PTE scan: entries read"),
    k("telemetry.{label}.queries", "count", "M5: queries of the device's top-K trackers"),
    k("telemetry.{label}.device_accesses", "count", "M5: accesses the device counted on its node"),
    k("telemetry.{label}.top_page_accesses", "count", "M5: accesses of the hottest page at the last query"),
    k("telemetry.{label}.top_word_accesses", "count", "M5: accesses of the hottest word at the last query"),
    k("telemetry.{label}.pages_found_accessed", "pages", "PTE scan: pages found accessed"),
    k("telemetry.{label}.flushes", "count", "PTE scan: TLB flushes after clearing bits"),
    k("telemetry.{label}.scan_seconds", "s", "PTE scan: time scanning"),
    k("telemetry.{label}.last_pass_seconds", "s", "PTE scan: the duration of the last pass"),
    k("telemetry.{label}.ns_per_pte", "ns", "PTE scan: the cost of reading one entry"),
    k("telemetry.{label}.looks", "count", "toy technique (tests): looks taken"),
    // -- scoring (the only reader of ground truth) --
    k("scoring.target", "fraction", "the precision and recall the time-to statistics wait for"),
    k("scoring.truth_threshold", "count", "accesses in a window that make a page truly hot"),
    k("optimum.fast_node", "index", "the fast node of the offline bound"),
    k("optimum.fast_capacity_pages", "pages", "the fast node's capacity in the bound"),
    k("optimum.accesses", "count", "accesses the bound places"),
    k("optimum.fast_accesses", "count", "accesses the bound serves from the fast node"),
    k("optimum.run_fast_accesses", "count", "accesses the run served from the fast node"),
    k("optimum.fast_share", "fraction", "the bound's share of accesses served fast"),
    k("optimum.run_fast_share", "fraction", "the run's share of accesses served fast"),
    k("optimum.saved_seconds", "s", "per thread: time the bound saves over the run"),
    k("optimum.overhead_seconds", "s", "per thread: the run's tiering overhead the bound omits"),
    k("optimum.app_seconds", "s", "the application's run time under the bound"),
    k("optimum.speedup", "factor", "the run's application time over the bound's"),
    // -- placement policies (agents/placement) --
    k("placement.policy", "label", "the placement policy"),
    k("placement.mode", "label", "how it places (allocation rule, plan, migration)"),
    k("placement.nodes", "count", "nodes with cores"),
    k("placement.run_time_s", "s", "the application's run time"),
    k("placement.overhead_s", "s", "time the policy added to the critical path"),
    k("placement.overhead_pct", "percent", "that time over the run time without it"),
    k("placement.profiling_overhead_pct", "percent", "the profiling overhead (its own run's if any)"),
    k("placement.local_access_fraction", "fraction", "share of accesses served by the core's node"),
    k("placement.resident_pages.{node}", "pages", "pages resident on a node at the end"),
    k("placement.profile.source", "label", "profile-guided: the sample source"),
    k("placement.profile.period", "count", "profile-guided: the sampling period"),
    k("placement.profile.samples", "count", "profile-guided: samples taken"),
    k("placement.profile.pages_with_affinity", "pages", "profile-guided: pages given a node"),
    k("placement.profile.interrupt_s", "s", "profile-guided: time in sampling interrupts"),
    k("placement.profile_run.run_time_s", "s", "profile-guided: the profiling run's run time"),
    k("placement.profile_run.overhead_s", "s", "profile-guided: the profiling run's overhead"),
    k("placement.profile_run.overhead_pct", "percent", "profile-guided: that overhead's share"),
    k("placement.migrate.interval_s", "s", "migrating mode: time between migrations"),
    k("placement.migrate.pages", "pages", "migrating mode: pages migrated"),
    k("placement.migrate.skipped_full", "pages", "migrating mode: pages left as the node was full"),
    k("placement.migrate.time_s", "s", "migrating mode: time spent migrating"),
    k("placement.migrate.core", "index", "migrating mode: the core that migrates"),
    // -- the tiering policy (agents/tiering) --
    k("tiering.policy", "label", "the tiering policy's name"),
    k("tiering.kind", "label", "the tiering policy's kind"),
    k("tiering.core", "index", "the core the policy runs on"),
    k("tiering.fast_node", "label", "the fast tier's node"),
    k("tiering.slow_node", "label", "the slow tier's node"),
    k("tiering.fast_capacity_bytes", "bytes", "the fast tier's capacity"),
    k("tiering.slow_capacity_bytes", "bytes", "the slow tier's capacity"),
    k("tiering.promoted_pages", "pages", "pages promoted to the fast tier"),
    k("tiering.demoted_pages", "pages", "pages demoted to the slow tier"),
    k("tiering.promoted_bytes", "bytes", "bytes promoted to the fast tier"),
    k("tiering.demoted_bytes", "bytes", "bytes demoted to the slow tier"),
    k("tiering.rate_limited", "count", "migrations the rate limit held back"),
    k("tiering.migration_seconds", "s", "time spent migrating (copies and shootdowns)"),
    k("tiering.shootdown_seconds", "s", "of the migration time, TLB shootdowns"),
    k("tiering.migrated_bytes", "bytes", "bytes promoted and demoted"),
    k("tiering.unlogged_pages", "pages", "pages named after the decision log was full (not audited)"),
    k(
        "tiering.ping_pong",
        "count",
        "page moves reversing the page's previous move within the ping-pong window",
    ),
    k("tiering.wasted_promotions", "count", "promotions demoted again with no access seen in between"),
    k("tiering.pingpong_window_s", "s", "the ping-pong window (scoring.pingpong_window)"),
    k("tiering.cpu_seconds", "s", "CPU time of the policy's own work"),
    k("tiering.plans", "count", "hottest-first: plans made"),
    k("tiering.plan_bytes", "bytes", "hottest-first: bytes the last plan wants fast"),
    k("tiering.resident_runs", "count", "hottest-first: runs of pages resident fast"),
    k("tiering.blocked", "count", "hottest-first, HeMem: migrations the fast tier's fill blocked"),
    k("tiering.rate_limit_mbps", "MB/s", "hottest-first: the migration rate limit"),
    k("tiering.samples", "count", "HeMem, Memtis, HybridTier, ARMS, PACT: samples received"),
    k("tiering.tx_commits", "count", "transactional promotions committed (copy_mode = transactional)"),
    k("tiering.tx_aborts", "count", "transactional promotions aborted by a write during the copy"),
    k(
        "tiering.tx_dropped",
        "count",
        "transactional promotions given up (tx_retries aborts spent, or no room at the commit)",
    ),
    k("tiering.huge_splits", "count", "2 MiB pages split on promotion (split_huge = true)"),
    k(
        "tiering.shadow_demotions",
        "count",
        "NOMAD: demotions of clean pages with a shadow (remapped, no copy)",
    ),
    k("tiering.copy_demotions", "count", "NOMAD: demotions that copied the page back"),
    k(
        "tiering.exchanges",
        "count",
        "with exchange = true: promotion/demotion pairs exchanged in one operation",
    ),
    k("tiering.shadow_bytes", "bytes", "NOMAD: slow-tier shadow copies kept at the end"),
    k("tiering.sample_batches", "count", "HybridTier: sample batches applied to the sketches"),
    k("tiering.metadata_bytes", "bytes", "HybridTier: bytes of its count-min sketches"),
    k("tiering.coolings", "count", "HeMem, Memtis, HybridTier: coolings (counts halved)"),
    k("tiering.tracked_pages", "pages", "HeMem, Memtis: pages with a count"),
    k("tiering.hot_threshold_bin", "index", "Memtis: the histogram bin that is hot"),
    k("tiering.sample_period", "count", "Memtis: the sampling period at the end"),
    k("tiering.period_adjustments", "count", "Memtis: changes of the sampling period"),
    k("tiering.scans", "count", "NUMA tiering, NOMAD: hint-fault scans"),
    k("tiering.hot_faults", "count", "NUMA tiering, NOMAD: hint faults on hot pages"),
    k("tiering.cold_faults", "count", "NUMA tiering: hint faults on pages not hot"),
    k("tiering.fault_rate_limited", "count", "NUMA tiering: promotions the fault rate limit held"),
    k("tiering.reclaims", "count", "NUMA tiering: demotion scans"),
    k("tiering.free_enough_promotions", "count", "NUMA tiering: promotions while the node had room"),
    k("tiering.promote_candidates", "count", "NUMA tiering: pages found hot enough to promote"),
    k("tiering.hot_threshold_ms", "ms", "NUMA tiering: the hot threshold at the end"),
    k("tiering.threshold_changes", "count", "NUMA tiering: changes of the hot threshold"),
    k("tiering.lru_rebuilds", "count", "NUMA tiering: rebuilds of the demotion lists"),
    k("tiering.arms_intervals", "count", "ARMS: updates of the moving averages"),
    k("tiering.arms_tracked", "pages", "ARMS: pages with moving averages at the end"),
    k("tiering.arms_rejected", "count", "ARMS: promotions the cost/benefit test refused"),
    k("tiering.arms_swaps", "count", "ARMS: promotions that demoted a colder fast page"),
    k(
        "tiering.arms_accesses_per_sample",
        "factor",
        "ARMS: accesses per sample at the end (PMU count over samples)",
    ),
    k("tiering.hint_scans", "count", "pghot: hint-fault scans"),
    k("tiering.pghot_recorded", "count", "pghot, klruscand: accesses recorded in the hotness bytes"),
    k("tiering.pghot_marked", "count", "pghot, klruscand: pages marked migrate-ready"),
    k("tiering.pghot_records", "pages", "pghot, klruscand: pages with a hotness byte at the end"),
    k("tiering.kmigrated_walks", "count", "pghot, klruscand: kmigrated's walks"),
    k("tiering.kmigrated_pfns", "pages", "pghot, klruscand: PFNs of hot sections kmigrated walked"),
    k(
        "tiering.window_rate_limited",
        "count",
        "pghot, klruscand: walks the 1 s promotion window's limit stopped",
    ),
    k("tiering.kswapd_reclaims", "count", "pghot, kmmscand, klruscand, M5: kswapd wake-ups that demoted"),
    k("tiering.abit_steps", "count", "kmmscand: scan steps"),
    k("tiering.abit_passes", "count", "kmmscand: passes over the whole address space"),
    k("tiering.abit_ptes", "count", "kmmscand, klruscand: PTEs read"),
    k("tiering.abit_found", "count", "kmmscand, klruscand: slow-tier pages found accessed"),
    k(
        "tiering.abit_listed",
        "count",
        "kmmscand: pages listed for promotion (accessed at two consecutive scans)",
    ),
    k("tiering.mglru_walks", "count", "klruscand: MGLRU aging walks completed"),
    k("tiering.mglru_max_seq", "count", "klruscand: MGLRU's youngest generation's sequence number"),
    k("tiering.topk_lists", "count", "M5: top-K lists received from the device"),
    k("tiering.pact_tracked", "pages", "PACT: pages with a criticality at the end"),
    k("tiering.pact_throttled", "count", "PACT: intervals ALTO's throttle cut the promotions"),
    k("tiering.pact_eager_demotions", "pages", "PACT: pages demoted for falling below the promotion bin"),
    k("tiering.pact_promotion_bin", "index", "PACT: the promotion bin at the end"),
    k("tiering.colloid.samples", "count", "Colloid: samples received"),
    k("tiering.colloid.measures", "count", "Colloid: latency measurements"),
    k("tiering.colloid.unbalanced_measures", "count", "Colloid: measurements with unequal latencies"),
    k("tiering.colloid.fast_latency_ns", "ns", "Colloid: the fast tier's measured latency"),
    k("tiering.colloid.slow_latency_ns", "ns", "Colloid: the slow tier's measured latency"),
    k("tiering.colloid.delta_p", "fraction", "Colloid: the share of accesses to move"),
    k("tiering.colloid.p_lo", "fraction", "Colloid: the low bound of its search"),
    k("tiering.colloid.p_hi", "fraction", "Colloid: the high bound of its search"),
    k("tiering.colloid.promoted_pages", "pages", "Colloid: pages promoted to balance latencies"),
    k("tiering.colloid.demoted_pages", "pages", "Colloid: pages demoted to balance latencies"),
    k("tiering.damon.nr_regions", "count", "DAMON-mtier: regions at the end"),
    k("tiering.damon.aggregations", "count", "DAMON-mtier: aggregation intervals"),
    k("tiering.damon.ops_updates", "count", "DAMON-mtier: updates of the monitored ranges"),
    k("tiering.damon.samples_checked", "count", "DAMON-mtier: region samples checked"),
    k("tiering.damon.entries_checked", "count", "DAMON-mtier: page-table entries read"),
    k("tiering.damon.entries_prepared", "count", "DAMON-mtier: entries whose bit was cleared"),
    k("tiering.damon.checks_reused", "count", "DAMON-mtier: checks answered by an earlier read"),
    k("tiering.damon.sampling_interval_s", "s", "DAMON-mtier: the sampling interval at the end"),
    k("tiering.damon.aggregation_interval_s", "s", "DAMON-mtier: the aggregation interval"),
    k("tiering.damon.interval_tunings", "count", "DAMON-mtier: auto-tunings of the intervals"),
    k("tiering.damon.hot_threshold", "count", "DAMON-mtier: accesses that make a region hot"),
    k("tiering.damon.huge_page_samples", "count", "DAMON-mtier: samples in a huge page"),
    k("tiering.damon.damos.schemes", "count", "DAMON-mtier: DAMOS schemes"),
    k("tiering.damon.damos.inactive_checks", "count", "DAMON-mtier: checks of schemes not active"),
    k("tiering.damon.damos.{scheme}.action", "label", "DAMON-mtier: a scheme's action"),
    k("tiering.damon.damos.{scheme}.nr_tried", "count", "DAMON-mtier: regions a scheme tried"),
    k("tiering.damon.damos.{scheme}.sz_tried", "bytes", "DAMON-mtier: bytes a scheme tried"),
    k("tiering.damon.damos.{scheme}.nr_applied", "count", "DAMON-mtier: regions a scheme applied to"),
    k("tiering.damon.damos.{scheme}.sz_applied", "bytes", "DAMON-mtier: bytes a scheme applied to"),
    k("tiering.damon.damos.{scheme}.sz_ops_filter_passed", "bytes", "DAMON-mtier: bytes past filters"),
    k("tiering.damon.damos.{scheme}.qt_exceeds", "count", "DAMON-mtier: times a quota ran out"),
    k("tiering.damon.damos.{scheme}.esz_bytes", "bytes", "DAMON-mtier: a scheme's effective quota"),
    k("tiering.damon.damos.{scheme}.goal_score_bp", "bp", "DAMON-mtier: a scheme's goal score"),
    k("tiering.toy.promoted", "pages", "toy policy (tests): pages promoted"),
    k("tiering.toy.feeds", "count", "toy policy (tests): feeds received"),
    // -- workloads (workload/) --
    k("workload.accesses", "count", "accesses the workload issued"),
    k("workload.kernel", "label", "OpenMP kernel: stream or jacobi"),
    k("workload.init", "label", "OpenMP kernel: serial or parallel initialization"),
    k("workload.spin_reads", "count", "OpenMP kernel: reads spent waiting at barriers"),
    k("workload.sync_events", "count", "replay: rows of the recording's sync table"),
    k(
        "workload.sync_points",
        "count",
        "replay: sync points the threads went through (barriers, acquires, releases)",
    ),
    k(
        "workload.sync_wait_s",
        "s",
        "replay: simulated time threads waited at barriers and for locks, summed over threads",
    ),
    k(
        "workload.sync_forced",
        "count",
        "replay: waits of a cut recording let through (every unfinished thread waited)",
    ),
    k("workload.threads_done", "count", "OpenMP kernel: threads that finished"),
    k("workload.kv.keys", "count", "key-value store: keys"),
    k("workload.kv.record_bytes", "bytes", "key-value store: bytes per record"),
    k("workload.kv.index_bytes", "bytes", "key-value store: bytes of the hash index"),
    k("workload.kv.slab_bytes", "bytes", "key-value store: bytes of the value slab"),
    k("workload.kv.requests", "count", "key-value store: requests completed"),
    k("workload.kv.reads", "count", "key-value store: gets"),
    k("workload.kv.updates", "count", "key-value store: updates"),
    k("workload.kv.throughput", "per s", "key-value store: requests per second"),
    k("workload.kv.mean_us", "us", "key-value store: mean request latency"),
    k("workload.kv.p50_us", "us", "key-value store: median request latency"),
    k("workload.kv.p95_us", "us", "key-value store: 95th percentile request latency"),
    k("workload.kv.p99_us", "us", "key-value store: 99th percentile request latency"),
    k("workload.points_updated", "count", "stencil: grid points updated"),
    k("workload.sweeps", "count", "stencil: sweeps over the grid (fractional)"),
    k("workload.rows", "count", "sparse matrix: rows"),
    k("workload.nnz", "count", "sparse matrix: non-zeros"),
    k("workload.dof", "count", "sparse matrix: degrees of freedom per point"),
    k("workload.iterations_completed", "count", "sparse matrix, LULESH: iterations every thread did"),
    k("workload.phase.{phase}.name", "label", "masim: a phase's name"),
    k("workload.phase.{phase}.choices", "count", "masim: pattern choices in a phase"),
    k("workload.phase.{phase}.accesses", "count", "masim: accesses of a phase"),
    k("workload.phase.{phase}.region.{region}.accesses", "count", "masim: a phase's accesses to a region"),
    k("workload.region.{region}.accesses", "count", "masim: accesses to a region"),
    k("workload.nodes", "count", "pointer chase: list nodes; LULESH: mesh nodes"),
    k("workload.steps", "count", "pointer chase: steps taken"),
    k("workload.items", "count", "Zipfian: items"),
    k("workload.elements", "count", "LULESH: mesh elements; STREAM: elements processed"),
    k("workload.passes", "count", "STREAM: passes over the arrays (fractional)"),
    k("workload.recorded_accesses", "count", "replay: accesses in the recording"),
    k("workload.recorded_threads", "count", "replay: threads in the recording"),
    k("workload.touched_pages", "pages", "replay: pages touched"),
    k("workload.mapped_bytes", "bytes", "replay: bytes of the recording's mappings"),
    k("workload.mappings", "count", "replay: mappings of the recording"),
    k("workload.hot_bytes", "bytes", "hot set: bytes of the hot set"),
    k("workload.needles", "count", "hot set: hot needles"),
    k("workload.needle_bytes", "bytes", "hot set: bytes per needle"),
    k("workload.hot_accesses", "count", "hot set: accesses to the hot set"),
    k("workload.cold_accesses", "count", "hot set: accesses outside the hot set"),
    k("workload.epochs", "count", "hot set: epochs (moves of the hot set)"),
    k("workload.preset", "label", "Sweep3D: the preset"),
    k("workload.iterations_done", "count", "Sweep3D: iterations every thread did"),
    k("workload.points_visited", "count", "Sweep3D: grid points visited"),
];

/// Every column a run's time series may have (one value per window).
pub const COLUMNS: &[StatKey] = &[
    k("window", "index", "the window's number"),
    k("t_start_s", "s", "the window's start"),
    k("t_end_s", "s", "the window's end"),
    k("accesses", "count", "accesses in the window"),
    k("reads", "count", "loads in the window"),
    k("writes", "count", "stores in the window"),
    k("pages_touched", "pages", "distinct pages accessed in the window (ground truth)"),
    k("bytes_touched", "bytes", "bytes of those pages"),
    k("tlb_misses", "count", "TLB misses in the window"),
    k("l2_tlb_hits", "count", "L2 TLB hits in the window"),
    k("page_faults", "count", "page faults in the window"),
    k("remote_invalidations", "count", "remote TLB invalidations in the window"),
    k("accesses_per_ms", "per ms", "accesses per simulated millisecond in the window"),
    k("truth_bytes", "bytes", "bytes of the truly hot pages of the window"),
    k("node.{node}.accesses", "count", "accesses a node served in the window"),
    k("node.{node}.resident_bytes", "bytes", "bytes resident on a node at the window's end"),
    k("node.{node}.loaded_latency_ns", "ns", "a node's mean loaded latency in the window"),
    k("node.{node}.utilization", "fraction", "a node's bandwidth utilization at the window's end"),
    k("optimum.fast_share", "fraction", "the offline bound's share of accesses served fast"),
    k("optimum.run_fast_share", "fraction", "the run's share of accesses served fast"),
    k("telemetry.{label}.cpu_s", "s", "CPU time of the technique in the window"),
    k("telemetry.{label}.precision", "fraction", "precision of the technique's hot set"),
    k("telemetry.{label}.recall", "fraction", "recall of the technique's hot set"),
    k("telemetry.{label}.reported_bytes", "bytes", "bytes of the technique's hot set"),
    k("telemetry.{label}.nr_regions", "count", "region-based: regions in the window"),
    k("telemetry.{label}.nr_hot_regions", "count", "region-based: hot regions in the window"),
    k("telemetry.{label}.damos.{scheme}.esz_bytes", "bytes", "DAMOS: a scheme's effective quota"),
    k("telemetry.{label}.damos.{scheme}.sz_applied", "bytes", "DAMOS: bytes a scheme applied to"),
    k("telemetry.{label}.damos.{scheme}.goal_score_bp", "bp", "DAMOS: a scheme's goal score"),
    k("telemetry.{label}.samples", "count", "PEBS: records delivered in the window"),
    k("telemetry.{label}.interrupts", "count", "PEBS: interrupts in the window"),
    k("telemetry.{label}.period", "count", "PEBS: the sampling period at the window's end"),
    k("telemetry.{label}.pass_progress", "fraction", "PTE scan: progress of the current pass"),
    k("telemetry.{label}.passes", "count", "PTE scan: passes done"),
    k("tiering.fast_used_bytes", "bytes", "bytes resident on the fast tier at the window's end"),
    k("tiering.fast_hot_bytes", "bytes", "bytes of truly hot pages on the fast tier"),
    k("tiering.promoted_bytes", "bytes", "bytes promoted in the window"),
    k("tiering.demoted_bytes", "bytes", "bytes demoted in the window"),
    k("tiering.cpu_s", "s", "CPU time of the policy in the window"),
    k("tiering.plan_bytes", "bytes", "hottest-first: bytes the last plan wants fast"),
    k("tiering.hot_list", "pages", "HeMem: pages on the hot list"),
    k("tiering.promotion_queue", "pages", "NOMAD: pages waiting for a transactional copy"),
    k("tiering.arms_tracked", "pages", "ARMS: pages with moving averages"),
    k("tiering.pghot_ready", "pages", "pghot, klruscand: pages marked migrate-ready"),
    k("tiering.migration_list", "pages", "kmmscand: pages listed for promotion"),
    k("tiering.pact_throttle", "fraction", "PACT: ALTO's share of the batch allowed"),
    k("tiering.hot_threshold_bin", "index", "Memtis: the histogram bin that is hot"),
    k("tiering.sample_period", "count", "Memtis: the sampling period"),
    k("tiering.hot_faults", "count", "NUMA tiering: hint faults on hot pages so far"),
    k("tiering.hot_threshold_ms", "ms", "NUMA tiering: the hot threshold"),
    k("tiering.colloid.fast_latency_ns", "ns", "Colloid: the fast tier's measured latency"),
    k("tiering.colloid.slow_latency_ns", "ns", "Colloid: the slow tier's measured latency"),
    k("tiering.colloid.delta_p", "fraction", "Colloid: the share of accesses to move"),
    k("tiering.damon.sampling_interval_s", "s", "DAMON-mtier: the sampling interval"),
    k("tiering.damon.damos.{scheme}.esz_bytes", "bytes", "DAMON-mtier: a scheme's effective quota"),
    k("tiering.damon.damos.{scheme}.sz_applied", "bytes", "DAMON-mtier: bytes a scheme applied to"),
    k("tiering.damon.damos.{scheme}.goal_score_bp", "bp", "DAMON-mtier: a scheme's goal score"),
    k("kv.requests", "count", "key-value store: requests completed in the window"),
    k("kv.throughput", "per s", "key-value store: requests per second in the window"),
    k("kv.mean_us", "us", "key-value store: mean latency in the window"),
    k("kv.p50_us", "us", "key-value store: median latency in the window"),
    k("kv.p95_us", "us", "key-value store: 95th percentile latency in the window"),
    k("kv.p99_us", "us", "key-value store: 99th percentile latency in the window"),
];

/// Whether the dotted name `name` is of the entry whose key is `key`.
pub fn matches(key: &str, name: &str) -> bool {
    let mut parts = name.split('.');
    for want in key.split('.') {
        match parts.next() {
            Some(p) if !p.is_empty() && (is_placeholder(want) || want == p) => {}
            _ => return false,
        }
    }
    parts.next().is_none()
}

/// The entry of `name` among `entries` ([`STATS`] or [`COLUMNS`]).
pub fn find(entries: &'static [StatKey], name: &str) -> Option<&'static StatKey> {
    entries.iter().find(|e| matches(e.key, name))
}

fn is_placeholder(part: &str) -> bool {
    part.len() > 2
        && part.starts_with('{')
        && part.ends_with('}')
        && part[1..part.len() - 1].chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both() -> impl Iterator<Item = (&'static str, &'static StatKey)> {
        STATS.iter().map(|e| ("STATS", e)).chain(COLUMNS.iter().map(|e| ("COLUMNS", e)))
    }

    #[test]
    fn entries_are_well_formed() {
        for (list, e) in both() {
            let at = format!("{list}: `{}`", e.key);
            assert!(UNITS.iter().any(|(u, _)| *u == e.unit), "{at}: unit `{}` is not in UNITS", e.unit);
            assert!(!e.about.is_empty() && e.about.len() <= 88, "{at}: description of 1 to 88 characters");
            assert!(!e.about.contains(['"', '\\', '\n']), "{at}: no quote, backslash or newline");
            for part in e.key.split('.') {
                let plain = !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                assert!(plain || is_placeholder(part), "{at}: part `{part}` is not a name or a {{name}}");
            }
        }
    }

    /// Two keys overlap when some name matches both: then the catalogue would not say which
    /// entry a statistic is.
    #[test]
    fn no_two_entries_match_one_name() {
        for list in [STATS, COLUMNS] {
            for (i, a) in list.iter().enumerate() {
                for b in &list[i + 1..] {
                    let (pa, pb): (Vec<_>, Vec<_>) = (a.key.split('.').collect(), b.key.split('.').collect());
                    let overlap = pa.len() == pb.len()
                        && pa.iter().zip(&pb).all(|(x, y)| x == y || is_placeholder(x) || is_placeholder(y));
                    assert!(!overlap, "`{}` and `{}` match the same names", a.key, b.key);
                }
            }
        }
    }

    #[test]
    fn names_match_their_family_only() {
        assert!(matches("telemetry.{label}.cpu_seconds", "telemetry.DAMON-MOD.cpu_seconds"));
        assert!(!matches("telemetry.{label}.cpu_seconds", "telemetry.cpu_seconds"));
        assert!(!matches("telemetry.{label}.cpu_seconds", "telemetry.a.b.cpu_seconds"));
        assert!(!matches("telemetry.{label}.cpu_seconds", "telemetry..cpu_seconds"));
        assert!(matches("machine.accesses", "machine.accesses"));
        assert!(!matches("machine.accesses", "machine.accesses.x"));
        assert_eq!(
            find(STATS, "machine.core.3.tlb_misses").map(|e| e.key),
            Some("machine.core.{core}.tlb_misses")
        );
        assert_eq!(find(COLUMNS, "node.dram.accesses").map(|e| e.unit), Some("count"));
        assert!(find(STATS, "machine.no_such_stat").is_none());
    }
}
