//! The agents in the driver's list (one [`Slot`] each: the agent, its CPU time, its feed
//! routes): their events in time order ([`Run::fire_agents`]), the routes from each
//! subscription to its source ([`route_feeds`]) and the delivery of the feeds an agent
//! publishes ([`deliver`]).

use super::Run;
use crate::agents::{Agent, AgentCtx, Feed, FeedKind, MachineView, Ps, Role, NEVER};
use crate::error::{Result, SimError};
use crate::os::Machine;

/// One agent with the driver's bookkeeping.
pub(super) struct Slot {
    pub(super) agent: Box<dyn Agent>,
    pub(super) cpu: Ps,
    /// Feed kinds someone receives from this agent.
    pub(super) wants: Vec<FeedKind>,
    /// (kind, subscriber) routes.
    pub(super) routes: Vec<(FeedKind, usize)>,
    /// Index in the scorer (telemetry agents).
    pub(super) scored: Option<usize>,
}

impl Run {
    pub(super) fn next_event(&self) -> Ps {
        self.agents.iter().map(|s| s.agent.next_event()).min().unwrap_or(NEVER)
    }

    /// Hand the feeds agent `from` published to the dataset collector when it follows it.
    pub(super) fn tap(&mut self, from: usize, feeds: &[Feed]) {
        if let Some((c, Some(i))) = &mut self.dataset {
            if *i == from {
                for f in feeds {
                    c.on_feed(f);
                }
            }
        }
    }

    /// Run every agent event due at or before `now`, in time order, ties in list order.
    pub(super) fn fire_agents(&mut self, now: Ps) -> Result<()> {
        loop {
            let mut due: Option<(Ps, usize)> = None;
            for (i, s) in self.agents.iter().enumerate() {
                let t = s.agent.next_event();
                if t <= now && due.is_none_or(|(bt, _)| t < bt) {
                    due = Some((t, i));
                }
            }
            let Some((t, i)) = due else { return Ok(()) };
            let mut out = Vec::new();
            {
                let Slot { agent, cpu, wants, .. } = &mut self.agents[i];
                let core = agent.core();
                let mut ctx =
                    AgentCtx::new(t, MachineView::new(&mut self.machine), core, cpu, &mut out, wants);
                agent.on_event(&mut ctx)?;
                if agent.next_event() <= t {
                    return Err(SimError::runtime(format!(
                        "{} `{}` did not advance its next event past {}",
                        role_name(agent.role()),
                        agent.label(),
                        t
                    )));
                }
            }
            self.tap(i, &out);
            deliver(&mut self.agents, &mut self.machine, i, out, t)?;
        }
    }
}

/// An agent hook run once for every agent, in list order, before the run.
#[derive(Clone, Copy)]
pub(super) enum Hook {
    Prepare,
    Start,
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Telemetry => "telemetry",
        Role::Os => "OS agent",
        Role::Placement => "placement policy",
        Role::Tiering => "tiering",
        Role::Other => "agent",
    }
}

/// Resolve every subscription: the source agent by label, and the first accepted feed kind
/// it publishes.
pub(super) fn route_feeds(slots: &mut [Slot], file: &str) -> Result<()> {
    for j in 0..slots.len() {
        let Some(sub) = slots[j].agent.subscription() else { continue };
        let Some(i) =
            slots.iter().position(|s| s.agent.label() == sub.source && s.agent.role() == Role::Telemetry)
        else {
            let labels: Vec<&str> =
                slots.iter().filter(|s| s.agent.role() == Role::Telemetry).map(|s| s.agent.label()).collect();
            return Err(SimError::config(
                file,
                &sub.field,
                format!(
                    "no telemetry technique is named `{}` (the scenario has: {})",
                    sub.source,
                    if labels.is_empty() { "none".to_string() } else { labels.join(", ") }
                ),
            ));
        };
        let published = slots[i].agent.publishes().to_vec();
        let Some(kind) = sub.accepts.iter().copied().find(|k| published.contains(k)) else {
            let names = |v: &[FeedKind]| v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
            let kinds = crate::agents::telemetry::TelemetryConfig::kinds_publishing(&sub.accepts);
            return Err(SimError::config(
                file,
                &sub.field,
                format!(
                    "`{}` follows `{}`, a `{}` technique, which publishes {}; it needs {}{}",
                    slots[j].agent.kind(),
                    sub.source,
                    slots[i].agent.kind(),
                    names(&published),
                    names(&sub.accepts),
                    if kinds.is_empty() {
                        String::new()
                    } else {
                        format!(" (the techniques of kind {} publish them)", kinds.join(", "))
                    }
                ),
            ));
        };
        slots[i].routes.push((kind, j));
        if !slots[i].wants.contains(&kind) {
            slots[i].wants.push(kind);
        }
    }
    Ok(())
}

/// Deliver the feeds agent `from` published to its subscribers (and what they publish in
/// turn).
pub(super) fn deliver(
    slots: &mut [Slot],
    machine: &mut Machine,
    from: usize,
    feeds: Vec<Feed>,
    now: Ps,
) -> Result<()> {
    for f in feeds {
        let routes: Vec<usize> =
            slots[from].routes.iter().filter(|(k, _)| *k == f.kind()).map(|&(_, j)| j).collect();
        for j in routes {
            let mut out = Vec::new();
            {
                let Slot { agent, cpu, wants, .. } = &mut slots[j];
                let core = agent.core();
                let mut ctx = AgentCtx::new(now, MachineView::new(machine), core, cpu, &mut out, wants);
                agent.on_feed(&f, &mut ctx)?;
            }
            deliver(slots, machine, j, out, now)?;
        }
    }
    Ok(())
}
