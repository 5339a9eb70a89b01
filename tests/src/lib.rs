//! Shared helpers for the test suite.

use emu::{EmuError, EmuErrorKind, Emulator};
use host::Runtime;
use host::runtime::Backend;

/// The runtime the suite runs on: `KERNELS_BACKEND` picks it (default: a GPU when one is
/// present, the emulator otherwise), so one property suite serves both.
///
/// When the backend asked for cannot be had (`KERNELS_BACKEND=gpu` on a machine without one),
/// the test binary says why in one sentence and exits: every test would fail the same way.
pub fn runtime() -> Runtime {
    Runtime::from_env().unwrap_or_else(|e| {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            use std::io::Write as _;
            let asked = std::env::var(host::runtime::BACKEND_VAR).unwrap_or_default();
            let line = format!(
                "{}={asked}: {e}; this test binary stops here\n",
                host::runtime::BACKEND_VAR
            );
            // Straight to stderr: the harness captures eprintln! in tests, and exiting would
            // lose what it captured.
            let _ = std::io::stderr().write_all(line.as_bytes());
            std::process::exit(2);
        });
        unreachable!("the first caller exits")
    })
}

/// An emulator runtime and its emulator, for tests that launch their own (often deliberately
/// broken) kernels.
pub fn emulator() -> (Runtime, std::sync::Arc<Emulator>) {
    let rt = Runtime::emulator();
    let Backend::Emulator(emu) = rt.backend() else {
        unreachable!()
    };
    let emu = emu.clone();
    (rt, emu)
}

/// A runtime that counts and profiles, for tests of the project's own kernels that read the
/// emulator's counters or profile: the PTX backend when `KERNELS_BACKEND=ptx`, else the source
/// emulator; with the emulator that holds the memory and the profile.
pub fn counting() -> (Runtime, std::sync::Arc<Emulator>) {
    if std::env::var(host::runtime::BACKEND_VAR).as_deref() == Ok("ptx") {
        let rt = Runtime::ptx_from_env().expect("the PTX module loads");
        let Backend::Ptx(device) = rt.backend() else {
            unreachable!()
        };
        let emu = device.emulator().clone();
        (rt, emu)
    } else {
        emulator()
    }
}

/// The emulator error inside a runtime error, or a panic saying what came back instead.
#[track_caller]
pub fn emu_error<T: std::fmt::Debug>(result: host::Result<T>) -> EmuError {
    match result {
        Err(host::Error::Emulator(e)) => *e,
        other => panic!("expected an emulator error, got {other:?}"),
    }
}

/// Where the property tests keep the cases that once failed (proptest replays them first on
/// every run): one committed file for the suite, relative to the suite crate (the directory
/// `cargo test` runs its tests in). Proptest never writes it: see [`NEW_REGRESSIONS`].
pub const REGRESSIONS: &str = "proptest-regressions/suite.txt";

/// Where a new failure's seed is written: beside [`REGRESSIONS`], ignored by git, and replayed
/// too. A failure planted on purpose (breaking a kernel to see the emulator's message) stays
/// out of the committed file; one found and fixed is kept by moving its line into
/// [`REGRESSIONS`] (`tests/proptest-regressions/README.md`).
pub const NEW_REGRESSIONS: &str = "proptest-regressions/new.txt";

/// The suite's property-test configuration: `cases` cases (`PROPTEST_CASES` overrides it); the
/// seeds of [`REGRESSIONS`] and [`NEW_REGRESSIONS`] replayed first, new failures saved to the
/// second only.
pub fn proptest_config(cases: u32) -> proptest::test_runner::Config {
    use proptest::test_runner::{Config, FileFailurePersistence};
    Config {
        failure_persistence: Some(Box::new(Regressions {
            committed: FileFailurePersistence::Direct(REGRESSIONS),
            new: FileFailurePersistence::Direct(NEW_REGRESSIONS),
        })),
        ..Config::with_cases(cases)
    }
}

/// Reads both regression files, writes only the uncommitted one.
#[derive(Clone, Debug, PartialEq)]
struct Regressions {
    committed: proptest::test_runner::FileFailurePersistence,
    new: proptest::test_runner::FileFailurePersistence,
}

impl proptest::test_runner::FailurePersistence for Regressions {
    fn load_persisted_failures2(
        &self,
        source_file: Option<&'static str>,
    ) -> Vec<proptest::test_runner::PersistedSeed> {
        let mut seeds = self.committed.load_persisted_failures2(source_file);
        seeds.extend(self.new.load_persisted_failures2(source_file));
        seeds
    }

    fn save_persisted_failure2(
        &mut self,
        source_file: Option<&'static str>,
        seed: proptest::test_runner::PersistedSeed,
        shrunken_value: &dyn std::fmt::Debug,
    ) {
        self.new
            .save_persisted_failure2(source_file, seed, shrunken_value);
    }

    fn box_clone(&self) -> Box<dyn proptest::test_runner::FailurePersistence> {
        Box::new(self.clone())
    }

    fn eq(&self, other: &dyn proptest::test_runner::FailurePersistence) -> bool {
        other
            .as_any()
            .downcast_ref::<Self>()
            .is_some_and(|o| o == self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The kind of an emulator error.
#[track_caller]
pub fn emu_error_kind<T: std::fmt::Debug>(result: host::Result<T>) -> EmuErrorKind {
    emu_error(result).kind
}

/// Whether a launch's counted FLOPs agree with a cost model's.
///
/// The source emulator counts what the kernels mark with `count_flops`, the useful work the cost
/// models count, so there the two must be equal. `count_flops` compiles to nothing in the PTX:
/// the PTX backend counts the floating-point operations it executes (fma 2; add, mul, compare,
/// `ex2`, `rcp`... 1; `mma` 2 x 16 x 8 x 16), padding lanes, tile remainders and epilogues
/// included, so there the count must cover the model: at least as large.
pub fn flops_agree(counted: u64, model: u64) -> bool {
    static PTX: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ptx = *PTX.get_or_init(|| matches!(runtime().backend(), Backend::Ptx(_)));
    if ptx {
        counted >= model
    } else {
        counted == model
    }
}

#[cfg(test)]
mod tests {
    use proptest::test_runner::{FailurePersistence, FileFailurePersistence};

    use super::*;

    /// A failure's seed goes to the uncommitted file and is replayed from there; the committed
    /// file is read, never written.
    #[test]
    fn a_new_failure_is_saved_apart_from_the_committed_seeds() {
        let new: &'static str = Box::leak(
            format!(
                "{}/suite-new-{}.txt",
                std::env::temp_dir().display(),
                std::process::id()
            )
            .into_boxed_str(),
        );
        let _ = std::fs::remove_file(new);
        let mut regressions = Regressions {
            committed: FileFailurePersistence::Direct(REGRESSIONS),
            new: FileFailurePersistence::Direct(new),
        };
        let committed = std::fs::read_to_string(REGRESSIONS).unwrap();
        let seeds = regressions.load_persisted_failures2(Some(file!()));
        assert!(!seeds.is_empty(), "{REGRESSIONS} has seeds");
        regressions.save_persisted_failure2(Some(file!()), seeds[0].clone(), &"a planted failure");
        assert_eq!(std::fs::read_to_string(REGRESSIONS).unwrap(), committed);
        assert!(
            std::fs::read_to_string(new)
                .unwrap()
                .contains(&seeds[0].to_string())
        );
        assert_eq!(
            regressions.load_persisted_failures2(Some(file!())).len(),
            seeds.len() + 1
        );
        std::fs::remove_file(new).unwrap();
    }
}
