//! tierlab-core's tests: one integration binary against the library `make install` built,
//! instead of unit tests, whose harness compiles the whole crate (its Parquet reader and
//! writer included) a second time. One module per source file; they use the public API only.

mod lib_items;
mod page;
mod plan;
#[cfg(feature = "parquet")]
mod recording;
mod schema;
