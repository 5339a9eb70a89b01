//! The GPU window: the folder a lent GPU runs (`bundle`: binary, PTX, entry script), the vendor
//! baseline each row is read beside (`baseline`), and the summary of what came back
//! (`summary`).

pub mod baseline;
pub mod bundle;
pub mod summary;
