//! Shared region machinery of DAMON and Telescope (in progress).
