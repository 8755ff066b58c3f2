//! `interleave`: new pages go round-robin over the nodes, page by page (`numactl
//! --interleave=all`, MPOL_INTERLEAVE); full nodes are skipped. A bulk populate places each
//! 2 MiB chunk on the next node. No parameters, no overhead.
//!
//! Interleaving spreads every array evenly, so each core finds 1/N of its data local on N
//! nodes: better than first touch of serially initialized data, worse than affinity.

use tierlab_core::param::params;

use super::{PlacementBuildCtx, PlacementParams, PlacementPolicy};
use crate::agents::AgentCtx;
use crate::error::Result;
use crate::os::memory::Placement;

/// Parameters of `interleave` (none).
#[params]
#[derive(Clone, Debug)]
pub struct InterleaveParams {}

impl PlacementParams for InterleaveParams {
    fn build(&self, _ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>> {
        Ok(Box::new(Interleave))
    }
}

/// The `interleave` policy.
pub struct Interleave;

impl PlacementPolicy for Interleave {
    fn mode(&self) -> String {
        "interleave".into()
    }
    fn prepare(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        ctx.machine.set_placement(Placement::Interleave);
        ctx.machine.set_preferred(Vec::new());
        Ok(())
    }
}
