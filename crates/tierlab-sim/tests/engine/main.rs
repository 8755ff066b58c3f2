//! The engine's integration tests, as one test binary: one compile and link of the engine
//! for all of them instead of one per file (`cargo test -p tierlab-sim --test engine`; pick
//! a module with a filter, e.g. `cargo test -p tierlab-sim --test engine damos::`).

mod common;

mod architecture;
mod damos;
mod fuzz_readers;
mod gig_pages;
mod loaded;
mod masim_files;
mod optimum;
mod placement;
mod policies;
mod telescope;
mod tiering;
