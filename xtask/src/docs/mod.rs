//! The commands that keep the docs true: `figures` draws the teaching pictures from the code
//! (`figures`), `doc-pastes` checks the commands' outputs pasted in the chapters (`pastes`), and
//! the link and term checks run as unit tests (`lint`).

pub mod figures;
#[cfg(test)]
mod lint;
pub mod pastes;
