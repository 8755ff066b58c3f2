//! `first-touch`: a new page goes to the node of the core that first touches it (Linux's
//! default local allocation); when that node is full, to the next node by tier, then
//! distance. No parameters, no overhead.
//!
//! With serially initialized data (one thread writes everything before the parallel
//! region), every page lands on the initializing thread's node: the case profile-guided
//! placement fixes.

use tierlab_core::param::params;

use super::{PlacementBuildCtx, PlacementParams, PlacementPolicy};
use crate::agents::AgentCtx;
use crate::error::Result;
use crate::os::memory::Placement;

/// Parameters of `first-touch` (none).
#[params]
#[derive(Clone, Debug)]
pub struct FirstTouchParams {}

impl PlacementParams for FirstTouchParams {
    fn build(&self, _ctx: &PlacementBuildCtx) -> Result<Box<dyn PlacementPolicy>> {
        Ok(Box::new(FirstTouch))
    }
}

/// The `first-touch` policy.
pub struct FirstTouch;

impl PlacementPolicy for FirstTouch {
    fn mode(&self) -> String {
        "first-touch".into()
    }
    fn prepare(&mut self, ctx: &mut AgentCtx) -> Result<()> {
        ctx.machine.set_placement(Placement::FirstTouch);
        ctx.machine.set_preferred(Vec::new());
        Ok(())
    }
}
