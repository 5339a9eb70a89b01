//! What a kernel should cost and how long it would take: the device table ([`specs`]), the
//! roofline's arithmetic on the project's one cost vocabulary (`kernels::registry::Cost`,
//! re-exported with the `CostRoofline` trait in [`cost`]), occupancy and Little's law ([`occupancy`]), and the
//! performance model ([`model`]), which turns the emulator's counts on a sample of a launch's
//! blocks into a predicted time and the resource that limits it, and the published measurements
//! that model is known to disagree with ([`published`]) or is scored against ([`validation`]).
//!
//! It reads numbers handed to it (the emulator's samples, ptxas's registers) and never launches
//! a kernel. docs/model.md gives the equations and the source of every constant.

pub mod cost;
pub mod model;
pub mod occupancy;
pub mod published;
pub mod specs;
pub mod validation;
