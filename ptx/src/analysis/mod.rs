//! What is read off a PTX module without running it:
//!
//! - [`convergence`]: no block barrier or warp collective under a branch that splits the threads
//!   that must meet there (`cargo xtask ptxas`'s first step);
//! - [`dataflow`]: which instructions compute on a tensor-core product's result, the split the
//!   performance model reads for attention's phases.

pub mod convergence;
pub mod dataflow;
