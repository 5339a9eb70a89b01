//! The host side: loads the kernels' PTX, manages device buffers in HBM, launches kernels and
//! times them, on a CUDA GPU or on the CPU emulator, behind one API.
//!
//! ```
//! use host::{Runtime, ops};
//! let rt = Runtime::emulator();
//! let a = rt.upload(&[1.0f32, 2.0, 3.0]).unwrap();
//! let b = rt.upload(&[10.0f32, 20.0, 30.0]).unwrap();
//! let mut c = rt.alloc::<f32>(3).unwrap();
//! ops::elementwise::vector_add_f32(&rt, &a, &b, &mut c).unwrap();
//! assert_eq!(rt.download(&c).unwrap(), vec![11.0, 22.0, 33.0]);
//! ```

pub mod bench;
pub mod buffer;
pub mod cost;
pub mod emu;
pub mod error;
pub mod exercises;
pub mod gpu;
pub mod launch;
pub mod model;
pub mod occupancy;
pub mod ops;
pub mod ptx;
pub mod reference;
pub mod registry;
pub mod runtime;
pub mod specs;
pub mod tensor_map;

pub use buffer::{DeviceBuffer, Element};
pub use error::{Error, Result};
pub use launch::{LaunchConfig, dim3};
pub use runtime::Runtime;
