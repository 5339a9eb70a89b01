//! The PTX backend's front end and interpreter: what the GPU runs, executed on the emulator.
//!
//! - [`parse`] reads a module's text (directives, functions, variables, instructions);
//! - [`decode`] turns an entry into slot-indexed operations, refusing what the backend does not
//!   implement with the line and the instruction;
//! - [`exec`] interprets them thread by thread on the emulator's block scheduler (crate `emu`),
//!   so that the checks and counters are the emulator's own;
//! - [`analysis`] reads a module without running it: the convergence check of barriers and
//!   warp collectives, and the dataflow the performance model reads (which instructions compute
//!   on a tensor-core product's result).
//!
//! The crate takes PTX text from its caller and never chooses a build: the embedded modules and
//! the `KERNELS_PTX` file are the runtime's (`host::embedded`). docs/emulator.md, "Two backends".

pub mod analysis;
pub mod decode;
pub mod exec;
pub mod parse;
