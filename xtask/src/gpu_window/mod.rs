//! The GPU window: the folder a lent GPU runs (`bundle`: binary, PTX, entry script) and the
//! summary of what came back (`summary`). The vendor baseline each row is read beside is the
//! service `crate::baseline`, which `run` reads too.

pub mod bundle;
pub mod summary;
