//! The commands that keep the docs true: `figures` draws the teaching pictures from the code
//! (`figures`), `doc-pastes` checks the commands' outputs pasted in the chapters (`pastes`), and
//! the link and term checks (`lint`) and the chapters' GEMM tables against the cost models
//! (`numbers`) run as unit tests.

pub mod figures;
#[cfg(test)]
mod lint;
#[cfg(test)]
mod numbers;
pub mod pastes;
