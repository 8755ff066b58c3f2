//! The memory backend's periodic OS work as an agent: the hierarchical backend's replacement
//! policy scans Accessed bits on a timer (the Linux-like LRU's scanner), on dedicated scanner
//! threads outside the application's cores. The policy itself lives in the OS layer
//! ([`crate::os::replacement`]); this agent only gives its timer a place on the one clock.

use crate::error::Result;

use super::{Agent, AgentCtx, Ps, Role};

/// The backend's scanner.
pub struct ScannerAgent {
    label: String,
    next: Ps,
}

impl ScannerAgent {
    /// The scanner of the replacement policy `kind` (its first event at `first`).
    pub fn new(kind: &str, first: Ps) -> Self {
        ScannerAgent { label: format!("{kind}-scanner"), next: first }
    }
}

impl Agent for ScannerAgent {
    fn label(&self) -> &str {
        &self.label
    }
    fn kind(&self) -> &'static str {
        "replacement-scanner"
    }
    fn role(&self) -> Role {
        Role::Os
    }
    fn core(&self) -> usize {
        0
    }
    fn start(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        self.next = ctx.machine.backend_next_event();
        Ok(())
    }
    fn next_event(&self) -> Ps {
        self.next
    }
    fn on_event(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        ctx.machine.backend_tick(ctx.now);
        self.next = ctx.machine.backend_next_event();
        Ok(())
    }
}
