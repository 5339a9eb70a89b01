//! Any PTX module's entries, launched by name with typed arguments: the safe way to run a kernel
//! this project did not write (NVRTC's output, a hand-written `.ptx`) on the PTX backend, with
//! every check of the emulator on. `cargo xtask check` is a thin shell over it.
//!
//! ```
//! use host::foreign::{Arg, Module};
//! use host::LaunchConfig;
//! let text = "
//! .version 8.0
//! .target sm_90
//! .address_size 64
//! .visible .entry scale(.param .u64 x, .param .f32 k)
//! {
//!     .reg .b32 %r<2>;
//!     .reg .f32 %f<3>;
//!     .reg .b64 %rd<4>;
//!     ld.param.u64 %rd1, [x];
//!     ld.param.f32 %f1, [k];
//!     mov.u32 %r1, %tid.x;
//!     mul.wide.u32 %rd2, %r1, 4;
//!     add.s64 %rd3, %rd1, %rd2;
//!     ld.global.f32 %f2, [%rd3];
//!     mul.f32 %f2, %f2, %f1;
//!     st.global.f32 [%rd3], %f2;
//!     ret;
//! }";
//! let module = Module::load(text.to_string(), "scale.ptx").unwrap();
//! let rt = module.runtime();
//! let x = rt.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
//! // The last two elements only: a view two elements into the buffer.
//! let args = [Arg::view(&x, 2).unwrap(), Arg::F32(10.0)];
//! module.launch("scale", &LaunchConfig::linear(1, 2), &args).unwrap();
//! assert_eq!(rt.download(&x).unwrap(), vec![1.0, 2.0, 30.0, 40.0]);
//! ```

use std::ffi::c_void;
use std::marker::PhantomData;

use emu::{Error, LaunchConfig, LaunchCounters, Result};
use ptx::exec::Program;

use crate::runtime::{Backend, Runtime};
use crate::{DeviceBuffer, Element};

/// One argument of a launch: a buffer (from an element on) or a scalar, as the entry's
/// parameter list declares it (a pointer is a 64-bit parameter).
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    /// The device address of a buffer's element, with the buffer borrowed for the launch.
    Buffer {
        addr: usize,
        _buffer: PhantomData<&'a ()>,
    },
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl<'a> Arg<'a> {
    /// The whole of `buffer`: its first element's address.
    pub fn buffer<T: Element>(buffer: &'a DeviceBuffer<T>) -> Self {
        Self::Buffer {
            addr: buffer.ptr().addr(),
            _buffer: PhantomData,
        }
    }

    /// `buffer` from element `offset` on (`offset` may be its length: an empty view).
    pub fn view<T: Element>(buffer: &'a DeviceBuffer<T>, offset: usize) -> Result<Self> {
        if offset > buffer.len() {
            return Err(Error::Ptx(format!(
                "a view {offset} elements into a buffer of {} starts past its end",
                buffer.len()
            )));
        }
        Ok(Self::Buffer {
            addr: buffer.ptr().addr() + offset * std::mem::size_of::<T>(),
            _buffer: PhantomData,
        })
    }

    /// The argument's bytes, little-endian as the parameter buffer holds them.
    fn bytes(&self) -> Vec<u8> {
        match *self {
            Self::Buffer { addr, .. } => (addr as u64).to_le_bytes().to_vec(),
            Self::I32(v) => v.to_le_bytes().to_vec(),
            Self::U32(v) => v.to_le_bytes().to_vec(),
            Self::I64(v) => v.to_le_bytes().to_vec(),
            Self::U64(v) => v.to_le_bytes().to_vec(),
            Self::F32(v) => v.to_le_bytes().to_vec(),
            Self::F64(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// One entry of a module: its name, its parameters (name, PTX type, bytes) and why it cannot run,
/// if it cannot.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: &'static str,
    pub params: Vec<(&'static str, &'static str, u32)>,
    pub refused: Option<String>,
}

/// A PTX module on its own PTX-backend runtime.
pub struct Module {
    runtime: Runtime,
    program: &'static Program,
    text: &'static str,
}

impl Module {
    /// Parses and decodes `text`; `origin` names it in reports (a file name). An entry the
    /// backend cannot run is refused at its launch, naming the instruction; the others run.
    pub fn load(text: String, origin: &str) -> Result<Self> {
        // A program lives as long as the process (its decoded kernels point into the text).
        let text: &'static str = Box::leak(text.into_boxed_str());
        let program = Program::load(text, origin.to_string())?;
        Ok(Self {
            runtime: Runtime::ptx(program),
            program,
            text,
        })
    }

    /// The module in the file at `path` (a regular file of PTX, within the size a module may be
    /// here: `ptx::exec::read_module_text`).
    pub fn file(path: &std::path::Path) -> Result<Self> {
        let text = ptx::exec::read_module_text(path)?;
        Self::load(text, &path.display().to_string())
    }

    /// The same module on the same device, its launches run with options `change` amends
    /// ([`Runtime::with_options`]).
    pub fn with_options(&self, change: impl FnOnce(&mut emu::LaunchOptions)) -> Self {
        Self {
            runtime: self.runtime.with_options(change),
            program: self.program,
            text: self.text,
        }
    }

    /// Runs `launches` on a view of this module and returns, beside their result, what their
    /// launches observed ([`Runtime::observe`]).
    pub fn observe<R>(&self, launches: impl FnOnce(&Module) -> R) -> (R, emu::Observed) {
        let (runtime, observer) = self.runtime.observing();
        let view = Self {
            runtime,
            program: self.program,
            text: self.text,
        };
        let result = launches(&view);
        (result, self.runtime.observed(&observer))
    }

    /// The runtime whose memory the module's buffers live in: allocate, upload and download
    /// with it.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The module's PTX text (for a tool that reads it, such as ptxas).
    pub fn text(&self) -> &'static str {
        self.text
    }

    /// Every entry, in the order the module declares them.
    pub fn entries(&self) -> Vec<Entry> {
        let decoded: Vec<(&'static str, Option<String>)> = self
            .program
            .entries()
            .map(|(name, k)| (name, k.err().map(str::to_string)))
            .collect();
        // The parameter lists from the text itself: a refused entry has no decoded kernel.
        let declared = ptx::parse::parse(self.text)
            .map(|m| m.functions)
            .unwrap_or_default();
        let mut entries: Vec<Entry> = decoded
            .into_iter()
            .map(|(name, refused)| {
                let params = declared
                    .iter()
                    .find(|f| f.entry && f.name == name)
                    .map(|f| f.params.iter().map(|p| (p.name, p.ty, p.bytes)).collect())
                    .unwrap_or_default();
                Entry {
                    name,
                    params,
                    refused,
                }
            })
            .collect();
        // Where the entry is declared: `.entry NAME` with nothing of a longer name after it (a
        // plain search finds `reverse` inside an earlier `reverse_unsynced`).
        let place = |name: &str| {
            let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
            let declared = |at: &usize| {
                let rest = self.text[at + ".entry".len()..].trim_start();
                rest.strip_prefix(name)
                    .is_some_and(|after| !after.starts_with(ident))
            };
            let mut entries = self.text.match_indices(".entry").map(|(at, _)| at);
            entries.find(declared).unwrap_or(usize::MAX)
        };
        entries.sort_by_key(|e| (place(e.name), e.name));
        entries
    }

    /// Launches entry `name` with `args`, one per parameter, each of the parameter's size (a
    /// buffer for a 64-bit parameter); the emulator's counters, or the bug it found.
    pub fn launch(&self, name: &str, cfg: &LaunchConfig, args: &[Arg]) -> Result<LaunchCounters> {
        let Some((entry, _)) = self.program.entries().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = self.entries().iter().map(|e| e.name).collect();
            return Err(Error::Ptx(format!(
                "the module has no entry `{name}` (its entries: {})",
                names.join(", ")
            )));
        };
        let kernel = self.program.kernel(entry)?;
        if args.len() != kernel.params.len() {
            return Err(Error::Ptx(format!(
                "`{entry}` takes {} parameters, {} arguments were given",
                kernel.params.len(),
                args.len()
            )));
        }
        let bytes: Vec<Vec<u8>> = args.iter().map(Arg::bytes).collect();
        for (k, (p, (b, a))) in kernel.params.iter().zip(bytes.iter().zip(args)).enumerate() {
            let pointer = matches!(a, Arg::Buffer { .. });
            if b.len() != p.bytes as usize || (pointer && p.bytes != 8) {
                return Err(Error::Ptx(format!(
                    "`{entry}` parameter {k} (`{}`, .{}) is {} bytes, argument {k} ({a:?}) is {}",
                    p.name,
                    p.ty,
                    p.bytes,
                    b.len()
                )));
            }
        }
        let params: Vec<*mut c_void> = bytes.iter().map(|b| b.as_ptr() as *mut c_void).collect();
        let sizes: Vec<usize> = bytes.iter().map(Vec::len).collect();
        let Backend::Ptx(device) = self.runtime.backend() else {
            unreachable!("a module's runtime is the PTX backend")
        };
        // SAFETY: each parameter pointer points at `sizes[i]` bytes this function owns until the
        // launch returns; a buffer argument is an address the emulator checks at every access
        // (an address outside its buffers is reported, not dereferenced).
        let options = self.runtime.options();
        let (counters, observed) =
            unsafe { device.launch_with(entry, cfg, &params, &sizes, &options) }?;
        self.runtime.record(observed);
        Ok(counters)
    }

    /// What the module's kernels printed with `printf` since the last call (or its load), in
    /// block and thread order; kept also when the launch failed, up to where it stopped.
    pub fn take_printed(&self) -> ptx::exec::Printed {
        self.program.take_printed()
    }
}
