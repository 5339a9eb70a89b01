//! The kernel registry: a kernel's file declares, beside its body, everything the rest of the
//! project needs to run, check, time and report it (docs/registry.md).
//!
//! A registered kernel's file ends with a [`Spec`] (host only: the GPU build never sees it): the
//! problem's dimensions at the GPU's sizes (one row of `cargo xtask run` each), the emulator's
//! and the tests', its typed inputs and output, how it is launched, its CPU reference and
//! tolerance, its cost model, its occupancy launch and, optionally, the vendor operation it is
//! read against. [`registry!`](crate::registry) in
//! `kernels/src/lib.rs` declares the module and lists its specs, one line per kernel's file
//! (`SPEC`, or one spec per kernel named in braces), and `cargo xtask run`, `inspect`, `predict`,
//! `ptxas`'s occupancy table, the device bundle's baselines and the property test
//! `tests/tests/registered.rs` all read that one list ([`crate::REGISTRY`]).
//!
//! Registered kernels take f32, f16 or bf16 buffers ([`Buffer`]: inputs uniform in the spec's
//! range and rounded to their type, one output, of their type or another, widened to f32 for the
//! check), f32 scratch workspaces if the launch needs them, u32 index inputs computed from the
//! dimensions ([`Spec::indices`]), and up to five `u32` dimensions; the launch gets each
//! pointer typed through [`Buffers::input`] and [`Buffers::output`], which refuse a type other
//! than the declared one, and [`Buffers::index`]. A spec's launch may launch several kernels in
//! order, and its cost states the exponentials the roofline's third roof times. Registered: the
//! scaffold's four templates (`cargo xtask new`), `vector_add_f32`, `vector_add_f16`,
//! `copy_strided`, the three transposes, the six softmaxes (f32 and bf16), GEMM steps 1 to 4,
//! the GEMV, the attention rows and split-KV decode attention (contiguous and paged), and the
//! Hopper kernels (GEMM step 5, attention on wgmma), which read their inputs through tensor maps
//! ([`Spec::tensor_maps`]) and run on sm_90a only ([`Spec::sm90a_only`]).

/// Declares the registered kernels, one line per kernel or per file:
///
/// ```ignore
/// registry! {
///     transpose::{TRANSPOSE_NAIVE, TRANSPOSE_SHARED},
///     elementwise_scale,
/// }
/// ```
///
/// makes `pub mod transpose;` and `pub mod elementwise_scale;` (the files
/// `kernels/src/transpose.rs` and `kernels/src/elementwise_scale.rs`) and lists, in
/// [`crate::REGISTRY`] (host only), the specs named in braces and the `SPEC` of a module named
/// alone: a file of several kernels names each one's spec, a file of one (what `cargo xtask new`
/// writes) needs only its module's name.
#[macro_export]
macro_rules! registry {
    ($($entries:tt)*) => {
        $crate::__registry!([] [] $($entries)*);
    };
}

/// [`registry!`]'s entries one at a time, gathering the modules in the first list and the specs
/// in the second, in order; a `macro_rules!` transcriber cannot pick between `$module::SPEC` and
/// the named specs by itself.
#[doc(hidden)]
#[macro_export]
macro_rules! __registry {
    ([$($done:ident)*] [$($spec:expr),*] $(,)?) => {
        $(pub mod $done;)*

        /// Every registered kernel's declaration, in the order of the `registry!` block
        /// (docs/registry.md).
        #[cfg(not(target_arch = "nvptx64"))]
        pub const REGISTRY: &[&$crate::registry::Spec] = &[$($spec),*];
    };
    ([$($done:ident)*] [$($spec:expr),*] $module:ident :: { $($named:ident),+ $(,)? } $(, $($rest:tt)*)?) => {
        $crate::__registry!([$($done)* $module] [$($spec,)* $(&$module::$named),+] $($($rest)*)?);
    };
    ([$($done:ident)*] [$($spec:expr),*] $module:ident $(, $($rest:tt)*)?) => {
        $crate::__registry!([$($done)* $module] [$($spec,)* &$module::SPEC] $($($rest)*)?);
    };
}

/// Launches a registered kernel through a [`Launcher`] (the host's runtime):
/// `launch_registered!(launcher, geometry, my_kernel(x, y, n))`, the arguments named once, as
/// with the host's `launch!`: the emulator calls the kernel function with them (so the compiler
/// checks them against its signature), a GPU and the PTX backend get the same values in the same
/// order as the PTX entry's parameters.
#[cfg(not(target_arch = "nvptx64"))]
#[macro_export]
macro_rules! launch_registered {
    ($launcher:expr, $geometry:expr, $kernel:ident ( $($arg:ident),* $(,)? )) => {
        $crate::registry::Launcher::launch(
            $launcher,
            stringify!($kernel),
            $geometry,
            // SAFETY: the launcher checks the geometry against the device's limits, and the
            // harness sized every buffer from the spec's own `inputs` and `output`.
            &|| unsafe { $kernel($($arg),*) },
            &[$($crate::registry::param(&$arg)),*],
            &[$(::core::mem::size_of_val(&$arg)),*],
        )
    };
}

#[cfg(not(target_arch = "nvptx64"))]
pub use host_side::*;

#[cfg(not(target_arch = "nvptx64"))]
mod host_side {
    use std::boxed::Box;
    use std::vec::Vec;

    use crate::cuda::tma::{TensorMap, TmaSwizzle};
    use crate::cuda::{Bf16, F16, GlobalPtr};

    /// The geometry a spec launches with: the one launch type of the project, which the
    /// emulator and the host's runtime name too.
    pub use crate::cuda::launch::LaunchConfig;

    /// The problem's dimensions, named by [`Spec::dims`] (`["n"]`, `["rows", "cols"]`,
    /// attention's `["batch", "heads", "n_q", "n_kv", "d"]`); the unnamed ones are 1. Each fits
    /// in a `u32` (the harness refuses larger ones). A spec's closures destructure what they
    /// use and leave the rest to `..` (`|[rows, cols, ..]|`).
    pub type Dims = [usize; 5];

    /// What a launch failed with: the host runtime's own error, boxed.
    pub type LaunchError = Box<dyn std::error::Error + Send + Sync>;

    /// The project's one cost vocabulary: the bytes a kernel moves across the HBM boundary, the
    /// re-reads among them that a GPU's L2 may serve, the FLOPs and exponentials it does and the
    /// units its FLOPs run on. A spec states it for one launch ([`Spec::cost`]), the host's
    /// operations for theirs (a GEMM, an attention flow, the decode passes), the emulator's
    /// counts are checked against it, and `perf::cost::CostRoofline` reads it against a GPU's
    /// roofs.
    ///
    /// `bytes_read` is every byte requested, re-reads included (what the emulator counts); the
    /// views callers read are methods: [`Cost::compulsory`] (what a GPU's measurement is read
    /// against) and [`Cost::modelled`] (what a modelled row takes from HBM). A view's re-read
    /// counts are folded into its `bytes_read`, which is why a report serialises the four counts
    /// and the unit only (`run.json`'s `cost`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub struct Cost {
        pub bytes_read: u64,
        pub bytes_written: u64,
        pub flops: u64,
        /// The exponentials (`ex2`, on the special function units): the roofline's third roof
        /// reads them. 0 for a kernel that takes none, which is most; the roof is still drawn
        /// for the kernels that do (softmax). Not checked against the emulator's count, which
        /// differs by design (`kernels::softmax::exp_shifted` skips the exponential of a row's
        /// maximum, the merges take their own): the model counts those, this is the work.
        pub exps: u64,
        /// Of `bytes_read`, those read again because of a tiling (a GEMM's strips of A and B,
        /// once per block column and block row), which a GPU's L2 may serve: the emulator counts
        /// them, a modelled row takes them all from HBM (its shape says `(no L2)`), and a GPU's
        /// measurement is read against the bytes without them, the compulsory traffic. 0 for a
        /// kernel that reads each byte once.
        #[serde(skip)]
        pub rereads: u64,
        /// Of `bytes_read`, the re-reads of a buffer small enough that a GPU's L2 keeps it for
        /// the whole launch (the GEMV's X, at most 448 KiB, read by every block; attention's
        /// tiles of K and V, shared by the blocks of one head): the emulator counts them; a
        /// modelled row and a GPU's measurement take the buffer from HBM once. 0 for most.
        #[serde(skip)]
        pub resident_rereads: u64,
        /// Of `bytes_read`, those a block reads again soon after its first read of them (an
        /// RMSNorm's second pass over its row, after the sum of squares), which L2 still holds:
        /// the emulator counts them; the roofline bound, a modelled row and a GPU's measurement
        /// take them from HBM once, as the performance model does. Without it the bound counts
        /// the row twice and sits above the prediction. 0 for a kernel that reads each byte once.
        #[serde(skip)]
        pub l2_rereads: u64,
        /// Where the FLOPs run: the roofline's compute roof.
        pub unit: ComputeUnit,
    }

    impl Cost {
        /// Nothing moved, nothing computed, on the CUDA cores: what a cost leaves its other
        /// counts at (`Cost { bytes_read, bytes_written, flops, ..Cost::NONE }`: most kernels
        /// take no exponential, read each byte once and compute in f32), and what a sum of
        /// launches starts from.
        pub const NONE: Cost = Cost {
            bytes_read: 0,
            bytes_written: 0,
            flops: 0,
            exps: 0,
            rereads: 0,
            resident_rereads: 0,
            l2_rereads: 0,
            unit: ComputeUnit::CudaCoreF32,
        };

        /// The bytes read without the re-reads: A and B once, for a GEMM; W and X once, for
        /// the GEMV; each row once, for an RMSNorm. A count too large to hold (`u64::MAX`,
        /// saturated) stays too large: what it held beyond the re-reads is unknown.
        pub const fn compulsory_read(&self) -> u64 {
            if self.bytes_read == u64::MAX {
                return u64::MAX;
            }
            self.modelled_read().saturating_sub(self.rereads)
        }

        /// The bytes a modelled row reads: every byte requested but the re-reads L2 serves for
        /// certain ([`Cost::resident_rereads`], [`Cost::l2_rereads`]); `u64::MAX` stays so, as
        /// in [`Cost::compulsory_read`].
        pub const fn modelled_read(&self) -> u64 {
            if self.bytes_read == u64::MAX {
                return u64::MAX;
            }
            self.bytes_read
                .saturating_sub(self.resident_rereads)
                .saturating_sub(self.l2_rereads)
        }

        /// The compulsory traffic, which a GPU's measurement is read against: the bytes read
        /// without any re-read ([`Cost::compulsory_read`]), none left to subtract.
        pub const fn compulsory(self) -> Cost {
            Cost {
                bytes_read: self.compulsory_read(),
                rereads: 0,
                resident_rereads: 0,
                l2_rereads: 0,
                ..self
            }
        }

        /// What a modelled row (no L2 but what it keeps for certain) reads: the bytes of
        /// [`Cost::modelled_read`]; the tiling's re-reads stay among them, and in `rereads`.
        pub const fn modelled(self) -> Cost {
            Cost {
                bytes_read: self.modelled_read(),
                resident_rereads: 0,
                l2_rereads: 0,
                ..self
            }
        }

        /// The bytes re-read that L2 may serve, of either kind ([`Cost::rereads`] and
        /// [`Cost::resident_rereads`]): what `bytes_read` holds beyond the compulsory bytes
        /// when it holds no [`Cost::l2_rereads`].
        pub const fn reread_bytes(&self) -> u64 {
            self.rereads.saturating_add(self.resident_rereads)
        }

        /// Total HBM traffic: bytes read and written.
        pub const fn bytes(&self) -> u64 {
            self.bytes_read.saturating_add(self.bytes_written)
        }

        /// This launch's cost and then `other`'s: each count added, saturating (a shape too
        /// large to count reads as `u64::MAX`, never wraps), on this one's unit.
        pub const fn plus(self, other: Cost) -> Cost {
            Cost {
                bytes_read: self.bytes_read.saturating_add(other.bytes_read),
                bytes_written: self.bytes_written.saturating_add(other.bytes_written),
                flops: self.flops.saturating_add(other.flops),
                exps: self.exps.saturating_add(other.exps),
                rereads: self.rereads.saturating_add(other.rereads),
                resident_rereads: self.resident_rereads.saturating_add(other.resident_rereads),
                l2_rereads: self.l2_rereads.saturating_add(other.l2_rereads),
                unit: self.unit,
            }
        }

        /// `n` launches of this cost (a model's layers, say), saturating.
        pub const fn times(self, n: u64) -> Cost {
            Cost {
                bytes_read: n.saturating_mul(self.bytes_read),
                bytes_written: n.saturating_mul(self.bytes_written),
                flops: n.saturating_mul(self.flops),
                exps: n.saturating_mul(self.exps),
                rereads: n.saturating_mul(self.rereads),
                resident_rereads: n.saturating_mul(self.resident_rereads),
                l2_rereads: n.saturating_mul(self.l2_rereads),
                unit: self.unit,
            }
        }
    }

    /// Which arithmetic units a kernel's FLOPs run on, and so which peak bounds it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum ComputeUnit {
        /// f32 on the CUDA cores (most kernels, 16-bit ones that compute in f32 included).
        CudaCoreF32,
        /// 16-bit inputs on the tensor cores, f32 accumulation (`mma.sync` on bf16 or f16).
        TensorCore16,
        /// 8-bit floating-point inputs (e4m3/e5m2) on the tensor cores: no kernel here, the
        /// roofline's workloads (`cargo xtask roofline`) only.
        TensorCore8,
    }

    /// How `cargo xtask ptxas`'s occupancy table launches the kernel: threads per block, dynamic
    /// shared memory, and, for a kernel that streams HBM, the bytes of global loads each thread
    /// has in flight before it waits on the first.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Occupancy {
        pub threads: u32,
        pub dynamic_shared: u32,
        pub in_flight_per_thread: Option<u32>,
    }

    /// The vendor operation a kernel's rows are read against on a GPU (`xtask/bundle/baselines.py`
    /// measures it): one of its operations (copy, add, strided_copy, transpose, softmax, matmul,
    /// linear, sdpa, ...), with the kernel's dimensions named as that operation reads them.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Baseline {
        pub op: &'static str,
        /// One name per entry of [`Spec::dims`], in order (`["rows", "cols"]` for `transpose`).
        pub dims: &'static [&'static str],
    }

    /// The problem at each of the project's three sizes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Shapes {
        /// The rows of `cargo xtask run`, in order, each at a GPU's size and at the emulator's.
        /// Usually one; a second where the kernel behaves differently at another aspect (a
        /// softmax's tall rows, past what the fused kernel keeps on chip).
        pub run: &'static [RunShape],
        /// The property test draws each dimension from 1 to this.
        pub test_max: Dims,
        /// Each dimension a multiple of this (1: any): the tensor-core GEMM's K and N, 8, so
        /// that its rows start on the 16-byte boundaries `cp.async` needs. The property test
        /// draws multiples (`test_max` and every run shape are), and the harness refuses other
        /// dimensions.
        pub multiple: Dims,
        /// At a GPU shape, how many of the output's rows ([`Spec::rows`]) are checked, spread
        /// over it (the first and the last among them), where the reference of every row would
        /// take minutes on a CPU (a 4096^3 GEMM's: 16). `None`: every row. The emulator's
        /// shapes and the test's are checked at every row.
        pub gpu_rows_checked: Option<usize>,
    }

    impl Shapes {
        /// Every size the spec names: each row's GPU and emulator shapes, the test's largest
        /// and the smallest, one element or one of each multiple (what a test of the spec's
        /// cost runs over).
        pub fn every(&self) -> impl Iterator<Item = Dims> + '_ {
            let rows = self.run.iter().flat_map(|r| [r.gpu, r.emulator]);
            rows.chain([self.test_max, self.multiple])
        }
    }

    /// One row of `cargo xtask run`: the problem at a GPU's size, and the smaller one the
    /// emulator runs in its place, with the same behaviour to check.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RunShape {
        /// What a GPU runs (and the performance model predicts without one): realistic,
        /// several times the L2.
        pub gpu: Dims,
        /// What the emulator runs and checks (seconds on two cores); not a multiple of the
        /// block, so that the edges are exercised.
        pub emulator: Dims,
    }

    /// The element type of a buffer: what the kernel reads or writes, one element at a time.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Elem {
        F32,
        F16,
        Bf16,
        /// Words whose bits the kernel moves and never computes with (`copy_words`): whole
        /// numbers, drawn from the spec's range rounded down, which stays within
        /// [`U32_EXACT_IN_F32`] so that the reference and the check, which read every value as
        /// f32, hold each exactly.
        U32,
    }

    /// The whole numbers f32 holds exactly, 0 to 2^24: the range a spec draws its
    /// [`Elem::U32`] buffers from stays within them.
    pub const U32_EXACT_IN_F32: (f32, f32) = (0.0, 16_777_216.0);

    impl Elem {
        /// The bytes of one element.
        pub const fn bytes(self) -> usize {
            match self {
                Self::F32 | Self::U32 => 4,
                Self::F16 | Self::Bf16 => 2,
            }
        }

        /// Its unit roundoff: the relative error of rounding a value to it, half an ulp of 1
        /// (0 for f32, whose rounding a kernel's f32 arithmetic already counts, and for words,
        /// which are never rounded).
        pub const fn unit_roundoff(self) -> f64 {
            match self {
                Self::F32 | Self::U32 => 0.0,
                Self::Bf16 => 1.0 / 256.0,
                Self::F16 => 1.0 / 2048.0,
            }
        }

        /// Its name as rows and baselines write it: `f32`, `f16`, `bf16`, `u32`.
        pub const fn name(self) -> &'static str {
            match self {
                Self::F32 => "f32",
                Self::F16 => "f16",
                Self::Bf16 => "bf16",
                Self::U32 => "u32",
            }
        }
    }

    /// A type a buffer's [`Elem`] names: `f32`, [`F16`], [`Bf16`] (the kernels' own, which
    /// are `half`'s on the host) or `u32`.
    pub trait Element: Copy {
        const ELEM: Elem;
    }

    impl Element for f32 {
        const ELEM: Elem = Elem::F32;
    }

    impl Element for F16 {
        const ELEM: Elem = Elem::F16;
    }

    impl Element for Bf16 {
        const ELEM: Elem = Elem::Bf16;
    }

    impl Element for u32 {
        const ELEM: Elem = Elem::U32;
    }

    /// One input or output of a launch: its length in elements and their type.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Buffer {
        pub len: usize,
        pub elem: Elem,
    }

    impl Buffer {
        /// `len` elements of `T`.
        pub const fn of<T: Element>(len: usize) -> Self {
            Self { len, elem: T::ELEM }
        }

        /// `len` f32 elements.
        pub const fn f32(len: usize) -> Self {
            Self {
                len,
                elem: Elem::F32,
            }
        }

        /// `len` f16 elements.
        pub const fn f16(len: usize) -> Self {
            Self {
                len,
                elem: Elem::F16,
            }
        }

        /// `len` bf16 elements.
        pub const fn bf16(len: usize) -> Self {
            Self {
                len,
                elem: Elem::Bf16,
            }
        }

        /// Its size in bytes.
        pub const fn bytes(self) -> usize {
            self.len * self.elem.bytes()
        }
    }

    /// Tensor maps (TMA descriptors, `cp.async.bulk.tensor`'s operand) over one input, which the
    /// harness encodes when it uploads the inputs (a driver call on a GPU) and hands to the
    /// launch ([`Buffers::tensor_map`]): `slabs` maps in one device buffer, map `i` viewing the
    /// `rows x cols` elements (row-major) that start at element `i * rows * cols` of the input
    /// (attention's one map per head, so that a box past a head's last row is zero-filled
    /// instead of reading the next head's), copied in boxes of `box_rows x box_cols` laid out
    /// in shared memory as `swizzle` says.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct TensorMaps {
        /// Which input ([`Spec::inputs`] index) the maps view.
        pub input: usize,
        pub slabs: usize,
        pub rows: usize,
        pub cols: usize,
        pub box_rows: u32,
        pub box_cols: u32,
        pub swizzle: TmaSwizzle,
    }

    /// How the performance model may sample a row whose every count, buffer and grid extent is
    /// affine in its keys per head (the dimension `n_kv`): at two shorter key lengths, extended
    /// along the line through them to the GPU shape's (`emu::sample::SampledLaunch::extended`),
    /// at a fraction of the cost of sampling the GPU shape itself.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct AffineKeys {
        /// The two shorter lengths on the source emulator: long enough that each launch's counts
        /// are on their line from the first of them, and multiples of every tile along the keys.
        pub short: (usize, usize),
        /// The same on the PTX backend, where the compiler's unrolling may put the counts on
        /// their line only over longer multiples.
        pub short_ptx: (usize, usize),
        /// The one launch (by PTX entry) that is affine, where the others are not: they are
        /// sampled at the GPU shape. `None`: every launch is.
        pub only: Option<&'static str>,
    }

    /// A device buffer's address and the element type it holds: [`Buffers::input`] hands it
    /// out typed, after checking the type.
    #[derive(Clone, Copy)]
    pub struct Untyped {
        pub ptr: GlobalPtr<u8>,
        pub elem: Elem,
    }

    impl Untyped {
        fn typed<T: Element>(self, what: &str) -> Result<GlobalPtr<T>, LaunchError> {
            if self.elem == T::ELEM {
                Ok(self.ptr.cast::<T>())
            } else {
                Err(std::format!(
                    "{what} is {}, the launch asks for it as {}",
                    self.elem.name(),
                    T::ELEM.name()
                )
                .into())
            }
        }
    }

    /// The device buffers of one launch, as kernel arguments.
    pub struct Buffers<'a> {
        /// One per [`Spec::inputs`] entry, in order.
        pub inputs: &'a [Untyped],
        pub output: Untyped,
        /// One per [`Spec::workspaces`] length, in order: scratch the launch's kernels pass
        /// between them.
        pub workspaces: &'a [GlobalPtr<f32>],
        /// One per [`Spec::indices`] list, in order: the u32 inputs that say where to read
        /// (decode attention's sequence lengths, its page table). Read through
        /// [`Buffers::index`].
        pub indices: &'a [GlobalPtr<u32>],
        /// Whether the launch adds its result to the output's contents (`C = A B + C`) instead
        /// of overwriting them: only for a spec that [`Spec::accumulates`] (the harness refuses
        /// it to the others). The harness's own launches (`cargo xtask run`, the property test)
        /// overwrite a zeroed output, which the reference and the cost describe.
        pub accumulate: bool,
        /// One per [`Spec::tensor_maps`] entry, in order: the address of its first map (map `i`
        /// of a slab-wise entry is `i` maps further). Read through [`Buffers::tensor_map`].
        pub tensor_maps: &'a [GlobalPtr<TensorMap>],
    }

    impl Buffers<'_> {
        /// Input `i` as a pointer to `T`: an error if the spec declares it of another type.
        pub fn input<T: Element>(&self, i: usize) -> Result<GlobalPtr<T>, LaunchError> {
            match self.inputs.get(i) {
                Some(b) => b.typed(&std::format!("input {i}")),
                None => Err(std::format!(
                    "input {i} asked for, the spec declares {}",
                    self.inputs.len()
                )
                .into()),
            }
        }

        /// The output as a pointer to `T`: an error if the spec declares it of another type.
        pub fn output<T: Element>(&self) -> Result<GlobalPtr<T>, LaunchError> {
            self.output.typed("the output")
        }

        /// Tensor maps `i` ([`Spec::tensor_maps`]): an error if the launch was given fewer.
        pub fn tensor_map(&self, i: usize) -> Result<GlobalPtr<TensorMap>, LaunchError> {
            self.tensor_maps.get(i).copied().ok_or_else(|| {
                std::format!(
                    "tensor maps {i} asked for, the launch has {}",
                    self.tensor_maps.len()
                )
                .into()
            })
        }

        /// Index input `i` ([`Spec::indices`]): an error if the launch was given fewer.
        pub fn index(&self, i: usize) -> Result<GlobalPtr<u32>, LaunchError> {
            self.indices.get(i).copied().ok_or_else(|| {
                std::format!(
                    "index input {i} asked for, the launch has {}",
                    self.indices.len()
                )
                .into()
            })
        }
    }

    /// What launches a kernel: the host's runtime (emulator, PTX backend or GPU) implements it.
    pub trait Launcher {
        /// Launches PTX entry `kernel` with `geometry`: `thread` is one simulated thread's body
        /// (the source emulator), `params` and `sizes` the arguments' bytes (a GPU, the PTX
        /// backend). [`launch_registered!`](crate::launch_registered) builds all three.
        fn launch(
            &self,
            kernel: &'static str,
            geometry: LaunchConfig,
            thread: &(dyn Fn() + Sync),
            params: &[*mut core::ffi::c_void],
            sizes: &[usize],
        ) -> Result<(), LaunchError>;
    }

    /// [`Spec::launch`]: launches the kernel on `buffers` at the dimensions given.
    pub type LaunchFn = fn(&dyn Launcher, &Buffers, Dims) -> Result<(), LaunchError>;

    /// What the reference expects of the rows of the output it was asked for.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Expected {
        /// Each element's expected value, row after row.
        pub values: Vec<f64>,
        /// Each element's magnitude, which [`Spec::tolerance`] is a multiple of: the size a
        /// floating-point sum's rounding errors scale with (a GEMM's `sum_k |a_ik b_kj|`, not
        /// the sum, which cancellation may make small). `None`: 1 for every element, the
        /// tolerance an absolute bound. A spec whose bound is no single multiple of one size
        /// states each element's bound here, with a tolerance of 1 (the GEMV's: its sum's
        /// error scales with the magnitude, its bf16 rounding with the value).
        pub magnitudes: Option<Vec<f64>>,
    }

    impl From<Vec<f64>> for Expected {
        /// Values whose tolerance is absolute.
        fn from(values: Vec<f64>) -> Self {
            Self {
                values,
                magnitudes: None,
            }
        }
    }

    /// A kernel argument as the driver wants it: a pointer to its bytes.
    #[doc(hidden)]
    pub fn param<T>(value: &T) -> *mut core::ffi::c_void {
        value as *const T as *mut core::ffi::c_void
    }

    /// Everything the project needs to know about a registered kernel, declared in its file.
    pub struct Spec {
        /// The PTX entry point, which is also the row's name in `cargo xtask run`.
        pub name: &'static str,
        /// One line: what it computes.
        pub what: &'static str,
        /// The names of the used dimensions (`["n"]`, `["rows", "cols"]`).
        pub dims: &'static [&'static str],
        pub shapes: Shapes,
        /// Each input buffer's length and element type (`Buffer::f32(n)`, `Buffer::bf16(n)`):
        /// its values are drawn uniformly in [`Spec::input_range`] and rounded to that type,
        /// and the reference receives them as f32, exactly what the kernel reads.
        pub inputs: fn(Dims) -> Vec<Buffer>,
        /// The range the inputs are drawn from, uniformly: `(-1.0, 1.0)` unless the kernel's
        /// values matter to what it is checked for (softmax's scores, `(-8.0, 8.0)`: rows of
        /// probabilities far from uniform); [`U32_EXACT_IN_F32`] for words (`copy_words`).
        pub input_range: (f32, f32),
        /// Whether the input values steer the kernel's branches (softmax skips the exponential of
        /// a row's maximum): then the performance model's inputs vary as the check's do, else
        /// they are zeros (hundreds of MB of random numbers cost seconds, and a copy's counts do
        /// not depend on them).
        pub values_steer: bool,
        /// Whether the performance model may sample the row at shorter key lengths and extend
        /// the counts to the GPU shape's ([`AffineKeys`]); `None` for every kernel but the
        /// attention rows that are affine in their keys.
        pub affine_keys: Option<AffineKeys>,
        /// The output buffer's length and element type (zeroed before the launch); it is
        /// widened to f32 before the check.
        pub output: fn(Dims) -> Buffer,
        /// The output's rows, of equal length, which the reference computes one by one: a
        /// matrix's rows, 1 for a vector. A GPU shape's check may cover only some of them
        /// ([`Shapes::gpu_rows_checked`]).
        pub rows: fn(Dims) -> usize,
        /// The length of each f32 scratch buffer the launch may use (softmax's row statistics,
        /// between its kernels), in order; none for most. Zeroed when allocated, never checked,
        /// and left as the last launch left them for the next (a timed launch repeats).
        pub workspaces: fn(Dims) -> Vec<usize>,
        /// The u32 inputs the kernel indexes with, computed from the dimensions rather than
        /// drawn (decode attention's per-sequence lengths and page table): random numbers
        /// would be out of range, and a rule of the dimensions varies them with each draw of
        /// the property test. Uploaded as they are ([`Buffers::index`] hands them to the
        /// launch); the reference calls the same function for them, typed, where the drawn
        /// inputs reach it as f32. None for most.
        pub indices: fn(Dims) -> Vec<Vec<u32>>,
        /// The tensor maps the kernel reads its inputs through ([`TensorMaps`]: which input, its
        /// shape as the map views it, the box and the swizzle), encoded by the harness when it
        /// uploads the inputs; none for most (the Hopper kernels: GEMM step 5, attention on
        /// wgmma).
        pub tensor_maps: fn(Dims) -> Vec<TensorMaps>,
        /// Whether the kernel exists in the sm_90a build only (`wgmma`, the TMA): the harness
        /// refuses it on any other device, `cargo xtask run` leaves its rows out there (and says
        /// so), the property test skips it, and the model predicts it for sm_90a GPUs only. The
        /// other builds keep its entry point with a body that traps.
        pub sm90a_only: bool,
        /// Launches the kernel on `buffers` ([`launch_registered!`](crate::launch_registered)),
        /// or its kernels in order, each with its own `launch_registered!`.
        pub launch: LaunchFn,
        /// The expected output's rows listed (indices into [`Spec::rows`], in order), from the
        /// inputs, computed on the CPU (in f64 where it sums), with each element's magnitude
        /// where the tolerance is relative to it ([`Expected`]).
        pub reference: fn(&[&[f32]], Dims, &[usize]) -> Expected,
        /// The largest accepted `|output - reference|` per element (0: exact), for inputs in
        /// [`Spec::input_range`], in units of the element's magnitude where the reference states
        /// one; say in a comment why it is enough and not more.
        pub tolerance: fn(Dims) -> f64,
        /// The bytes, FLOPs and exponentials one launch moves and does, and the units its FLOPs
        /// run on (the roofline's compute roof): the emulator's counted bytes must equal them,
        /// and its FLOPs agree (`suite::flops_agree`).
        pub cost: fn(Dims) -> Cost,
        /// Whether the launch can add to its output's contents ([`Buffers::accumulate`]: a
        /// GEMM's `C = A B + C`, which `host::ops::gemm` offers); false for most.
        pub accumulates: bool,
        pub occupancy: Occupancy,
        /// The vendor operation it is read against, or `None` (reported as "no vendor
        /// baseline", never an error).
        pub baseline: Option<Baseline>,
    }
}
