//! A stage built from its scenario ([`Run::build`]): the workload, the host-memory check,
//! the machine, the agents in list order (telemetry in scenario order, the backend's
//! scanner, placement, tiering, loaded latency) with their feed routes, the workload's
//! setup between the agents' `prepare` and `start`, the heatmap's bins.

use super::access::Batch;
use super::budget;
use super::results::MappingInfo;
use super::slots::{deliver, route_feeds, Hook, Slot};
use super::window::{app_overhead_ps, sum_counters, Heatmap, TimeSeries};
use super::Run;
use crate::agents::loaded::LoadedLatencyAgent;
use crate::agents::placement::{PlacementAgent, PlacementBuildCtx, StageInput};
use crate::agents::scanner::ScannerAgent;
use crate::agents::telemetry::TelemetryBuildCtx;
use crate::agents::tiering::{TieringAgent, TieringBuildCtx};
use crate::agents::{Agent, AgentCtx, FeedKind, MachineView, Role, NEVER};
use crate::error::{Result, SimError};
use crate::os::backend::Backend;
use crate::os::Machine;
use crate::scenario::Scenario;
use crate::scoring::optimum::Optimum;
use crate::scoring::{Scorer, TruthRule};
use crate::units::Ps;
use crate::workload::BuildCtx;

/// The fast and slow node of a run on a tiered machine (the tiering policy's, else the
/// first node of the fastest tier and the first of the slowest), for the optimum bound; none
/// on an untiered machine or the hierarchical backend.
fn tier_pair(sc: &Scenario) -> Option<(u8, u8)> {
    if sc.machine.hmem.is_some() {
        return None;
    }
    if let Some(t) = &sc.tiering {
        let c = t.common();
        return Some((c.tiers.fast, c.tiers.slow));
    }
    let nodes = &sc.machine.nodes;
    let fast = (0..nodes.len()).min_by_key(|&i| (nodes[i].tier, i))?;
    let slow = (0..nodes.len()).min_by_key(|&i| (std::cmp::Reverse(nodes[i].tier), i))?;
    (nodes[fast].tier < nodes[slow].tier).then_some((fast as u8, slow as u8))
}

impl Run {
    /// Attach a dataset collector following `spec.follow`, else the tiering policy's
    /// technique, else the first technique.
    pub(super) fn attach_dataset(&mut self, spec: super::dataset::DatasetSpec, file: &str) -> Result<()> {
        use crate::agents::{FeedKind, Role};
        let label = spec
            .follow
            .clone()
            .or_else(|| self.scenario.tiering.as_ref().and_then(|t| t.common().telemetry))
            .or_else(|| self.scenario.telemetry.first().map(|t| t.label()));
        let slot = match &label {
            Some(l) => {
                let i = self
                    .agents
                    .iter()
                    .position(|s| s.agent.role() == Role::Telemetry && s.agent.label() == l);
                if i.is_none() && spec.follow.is_some() {
                    let have: Vec<&str> = self
                        .agents
                        .iter()
                        .filter(|s| s.agent.role() == Role::Telemetry)
                        .map(|s| s.agent.label())
                        .collect();
                    return Err(SimError::config(
                        file,
                        "telemetry",
                        format!(
                            "no telemetry technique is named `{l}` (the scenario has: {})",
                            if have.is_empty() { "none".to_string() } else { have.join(", ") }
                        ),
                    ));
                }
                i
            }
            None => None,
        };
        if let Some(i) = slot {
            let published = self.agents[i].agent.publishes().to_vec();
            for k in [FeedKind::Samples, FeedKind::Regions] {
                if published.contains(&k) && !self.agents[i].wants.contains(&k) {
                    self.agents[i].wants.push(k);
                }
            }
        }
        let fast =
            tier_pair(&self.scenario).map(|(f, _)| (f, self.machine.os.mem.nodes[f as usize].capacity_pages));
        let follow = slot.map(|i| self.agents[i].agent.label().to_string());
        self.dataset = Some((super::dataset::Collector::new(spec, follow, fast)?, slot));
        Ok(())
    }

    /// Build the machine, the workload and the agents of `scenario`, and run the workload's
    /// setup. `input` is what the previous stage handed over.
    pub fn build(mut scenario: Scenario, ctx: &BuildCtx, input: Option<&StageInput>) -> Result<Self> {
        let mut workload = scenario.workload.build(ctx)?;
        let threads = workload.threads();
        if threads > scenario.machine.cores {
            return Err(SimError::config(
                &ctx.scenario_file,
                "workload.threads",
                format!("{threads} threads but the machine has {} cores", scenario.machine.cores),
            ));
        }
        // Before anything big is allocated: would the run fit in the host's memory?
        let natural =
            scenario.duration.map(|d| d.ps()).or_else(|| workload.natural_duration()).unwrap_or(Ps::ZERO);
        let agent_count = scenario.telemetry.len()
            + scenario.placement.is_some() as usize
            + scenario.tiering.is_some() as usize;
        budget::check(
            &ctx.scenario_file,
            &budget::estimate(&scenario, natural.whole_ns(), agent_count),
            budget::available_bytes(),
        )?;
        let mut machine = Machine::new(&scenario.machine);
        for t in 0..threads {
            machine.os.mm_cpumask[t] = true;
        }
        let cores = scenario.machine.cores;
        // The agents, in list order: telemetry, the backend's scanner, placement, tiering.
        let mut agents: Vec<Box<dyn Agent>> = Vec::new();
        for (index, t) in scenario.telemetry.iter().enumerate() {
            let tctx = TelemetryBuildCtx {
                seed: scenario.seed,
                scenario_file: ctx.scenario_file.clone(),
                index,
                cores,
                threads,
                nodes: scenario.machine.nodes.len(),
            };
            agents.push(Box::new(t.build_agent(&tctx)?));
        }
        if let (Backend::Hier(_), Some(p)) = (&machine.os.backend, scenario.policies.first()) {
            agents.push(Box::new(ScannerAgent::new(p.kind(), NEVER)));
        }
        if let Some(cfg) = &scenario.placement {
            let pctx = PlacementBuildCtx {
                seed: scenario.seed,
                scenario_file: &ctx.scenario_file,
                cores,
                cpu_ghz: scenario.machine.cpu_ghz,
                threads,
                input,
            };
            agents.push(Box::new(PlacementAgent::new(cfg, &pctx)?));
        }
        if let Some(cfg) = &scenario.tiering {
            let tctx = TieringBuildCtx {
                seed: scenario.seed,
                scenario_file: ctx.scenario_file.clone(),
                cores,
                threads,
                nodes: scenario.machine.nodes.len(),
            };
            agents.push(Box::new(TieringAgent::new(cfg, &tctx)?));
        }
        if let Some(a) = LoadedLatencyAgent::new(&scenario.machine.nodes, scenario.machine.latency_matrix()) {
            agents.push(Box::new(a));
        }
        let mut slots: Vec<Slot> = agents
            .into_iter()
            .map(|agent| Slot { agent, cpu: Ps::ZERO, wants: Vec::new(), routes: Vec::new(), scored: None })
            .collect();
        let labels: Vec<String> = slots
            .iter()
            .filter(|s| s.agent.role() == Role::Telemetry)
            .map(|s| s.agent.label().to_string())
            .collect();
        let mut k = 0;
        for s in &mut slots {
            if s.agent.role() == Role::Telemetry {
                s.scored = Some(k);
                s.wants.push(FeedKind::HotSet);
                k += 1;
            }
        }
        route_feeds(&mut slots, &ctx.scenario_file)?;
        let scorer = Scorer::new(&scenario.scoring, labels);
        let run_agents = |slots: &mut Vec<Slot>, machine: &mut Machine, hook: Hook| -> Result<()> {
            for i in 0..slots.len() {
                let mut out = Vec::new();
                {
                    let Slot { agent, cpu, wants, .. } = &mut slots[i];
                    let core = agent.core();
                    let mut actx =
                        AgentCtx::new(Ps::ZERO, MachineView::new(machine), core, cpu, &mut out, wants);
                    match hook {
                        Hook::Prepare => agent.prepare(&mut actx)?,
                        Hook::Start => agent.start(&mut actx)?,
                    }
                }
                deliver(slots, machine, i, out, Ps::ZERO)?;
            }
            Ok(())
        };
        run_agents(&mut slots, &mut machine, Hook::Prepare)?;
        workload.setup(&mut machine)?;
        if scenario.scoring.truth == TruthRule::Declared
            && workload.declared_hot_ranges(Ps::ZERO, Ps::NS).is_none()
        {
            return Err(SimError::config(
                &ctx.scenario_file,
                "scoring.truth",
                format!(
                    "\"declared\" needs a workload that declares its hot set (hotset); `{}` does not: use \"accessed\"",
                    scenario.workload.kind()
                ),
            ));
        }
        machine.start_backend(&scenario.policies, &ctx.scenario_file, scenario.seed)?;
        let end = match scenario.duration {
            Some(d) => d.ps(),
            None => workload.natural_duration().unwrap_or(Ps::ZERO),
        };
        if scenario.duration.is_none() && end > Ps::ZERO {
            scenario.duration = Some(crate::units::Duration(end.whole_ns()));
        }
        let truth = scenario.report.ground_truth;
        if !truth && scorer.active() && scenario.scoring.truth == TruthRule::Accessed {
            return Err(SimError::config(
                &ctx.scenario_file,
                "report.ground_truth",
                "false leaves nothing to score the [[telemetry]] techniques with under scoring.truth = \"accessed\": keep it true, or score by the declared hot set (scoring.truth = \"declared\")"
                    .to_string(),
            ));
        }
        // Without ground truth there is nothing to bin: no heatmap.
        let heatmap =
            if truth { Heatmap::layout(&machine, scenario.report.heatmap_bins) } else { Heatmap::default() };
        let mappings = machine
            .os
            .vmas
            .values()
            .map(|v| MappingInfo {
                name: v.name.clone(),
                start: v.start,
                length: v.len,
                page_size: v.page_size.bytes(),
            })
            .collect();
        let prev = sum_counters(&machine);
        run_agents(&mut slots, &mut machine, Hook::Start)?;
        let optimum = tier_pair(&scenario)
            .filter(|_| truth)
            .map(|(f, s)| Optimum::new(f, s, machine.os.mem.nodes[f as usize].capacity_pages));
        let audit = slots
            .iter()
            .position(|s| s.agent.role() == crate::agents::Role::Tiering)
            .filter(|_| truth)
            .map(|i| {
                (i, crate::scoring::migrations::MigrationAudit::new(scenario.scoring.pingpong_window.ps()))
            });
        let prev_overhead = app_overhead_ps(&machine, threads);
        Ok(Run {
            window: scenario.window.ps(),
            quantum: scenario.quantum.ps(),
            end: if end == Ps::ZERO { Ps::NEVER } else { end },
            scenario,
            machine,
            workload,
            threads,
            batches: (0..threads)
                .map(|_| Batch { buf: Vec::with_capacity(1 << 16), pos: 0, done: false })
                .collect(),
            heatmap,
            timeseries: TimeSeries::default(),
            mappings,
            windows: 0,
            prev,
            agents: slots,
            scorer,
            optimum,
            audit,
            prev_overhead,
            dataset: None,
        })
    }
}
