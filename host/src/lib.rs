//! The host side: loads the kernels' PTX, manages device buffers in HBM, launches kernels and
//! times them, on a CUDA GPU, on the CPU emulator (crate `emu`) or on the PTX interpreter
//! (crate `ptx`), behind one API; and the kernel catalogue above it: the registry harness, the
//! operations (`ops`), their CPU references and the exercises; the benchmark cases of
//! `cargo xtask run` (`cases`) and the prediction pipeline (`predict`: a case sampled at its GPU
//! shape, handed to the performance model with the register counts its caller gives).
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
pub mod cases;
pub mod embedded;
pub mod exercises;
pub mod foreign;
pub mod gpu;
pub mod ops;
pub mod predict;
pub mod ptx_build;
pub mod reference;
pub mod registry;
pub mod runtime;
pub mod tensor_map;

pub use buffer::{DeviceBuffer, Element};
pub use emu::{Error, LaunchConfig, Result, dim3};
pub use runtime::Runtime;
