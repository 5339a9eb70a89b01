//! What happens when a simulated thread faults: a panic is reported once, a stack overflow is
//! reported at all.
//!
//! **Panics.** A kernel that panics (an assertion, an arithmetic overflow) is caught and becomes
//! one [`EmuErrorKind::Panic`](super::EmuErrorKind::Panic) for the launch, with the panic's
//! message and location. The process's panic hook would also print every panicking thread's
//! message, 256 lines for 256 blocks: while a simulated thread runs, the hook installed here
//! records the location instead and prints nothing. Panics anywhere else go to the previous hook.
//!
//! **Stack overflow.**
//! Each coroutine stack ends in a guard page (corosensei maps it inaccessible). A thread whose
//! locals outgrow the stack touches it and the kernel raises SIGSEGV. The handler below, running
//! on the OS thread's alternate signal stack, recognises a fault in the guard page of the
//! coroutine now running and uses corosensei's trap support to make that coroutine return
//! [`StackOverflow`] instead: the scheduler reports it with the kernel, block and thread. Any
//! other fault goes to the handler that was installed before (Rust's own, which reports overflows
//! of ordinary thread stacks).
//!
//! Nothing on the abandoned stack is dropped: the block ends with the error. Supported on Linux
//! on x86-64 and AArch64; elsewhere an overflow stays a SIGSEGV.

use std::any::Any;
use std::cell::Cell;

use corosensei::trap::CoroutineTrapHandler;

/// What a simulated thread returns: `Err` carries a panic (or a [`StackOverflow`]).
pub(super) type ThreadResult = Result<(), Box<dyn Any + Send>>;

/// The payload of a thread whose stack overflowed.
pub(super) struct StackOverflow;

/// The coroutine now running on this OS thread: its trap handler and the guard page's range.
struct Armed {
    trap: CoroutineTrapHandler<ThreadResult>,
    guard: (usize, usize),
}

thread_local! {
    static ARMED: Cell<Option<Armed>> = const { Cell::new(None) };
    /// Whether a simulated thread is running on this OS thread (its panics are reported).
    static IN_KERNEL: Cell<bool> = const { Cell::new(false) };
    /// Where the last panic of a simulated thread happened.
    static PANIC_AT: Cell<Option<String>> = const { Cell::new(None) };
}

/// Installs (once) the panic hook that keeps simulated threads' panics quiet.
fn install_panic_hook() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_KERNEL.with(Cell::get) {
                let at = info.location().map(|l| l.to_string());
                PANIC_AT.with(|p| p.set(at));
            } else {
                previous(info);
            }
        }));
    });
}

/// Where the simulated thread that just panicked on this OS thread panicked.
pub(super) fn panic_location() -> Option<String> {
    PANIC_AT.with(Cell::take)
}

/// Size of the guard page corosensei puts below each stack.
pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}

/// Installs the fault handler and the panic hook (each once per process) and this OS thread's
/// alternate signal stack (once): before the first [`arm`] of a block, not at every resume.
pub(super) fn install() {
    imp::install();
    install_panic_hook();
}

/// Makes a fault in `[guard, guard + page)` end the coroutine `trap` belongs to, which is about
/// to run on this OS thread ([`install`] has run on it).
pub(super) fn arm(trap: CoroutineTrapHandler<ThreadResult>, guard: usize, page: usize) {
    IN_KERNEL.with(|k| k.set(true));
    ARMED.with(|a| {
        a.set(Some(Armed {
            trap,
            guard: (guard, guard + page),
        }))
    });
}

/// The coroutine stopped running.
pub(super) fn disarm() {
    ARMED.with(|a| a.set(None));
    IN_KERNEL.with(|k| k.set(false));
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use std::cell::Cell;
    use std::sync::OnceLock;

    use super::{ARMED, StackOverflow, ThreadResult};

    /// The handlers installed before ours, for faults that are not ours.
    static PREVIOUS: OnceLock<[libc::sigaction; 2]> = OnceLock::new();

    thread_local! {
        static ALT_STACK: Cell<bool> = const { Cell::new(false) };
    }

    const SIGNALS: [libc::c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

    /// Installs the handler (once per process) and an alternate signal stack (once per OS thread
    /// that has none: the overflowing stack cannot run the handler).
    pub(super) fn install() {
        PREVIOUS.get_or_init(|| {
            SIGNALS.map(|sig| {
                // SAFETY: a zeroed sigaction is valid; the handler is async-signal-safe (it
                // reads a thread-local Cell and writes the interrupted context).
                unsafe {
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                    action.sa_sigaction = on_fault as *const () as usize;
                    libc::sigemptyset(&mut action.sa_mask);
                    let mut previous: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(sig, &action, &mut previous);
                    previous
                }
            })
        });
        if !ALT_STACK.with(Cell::get) {
            // SAFETY: querying the current alternate stack; a new one is leaked on purpose (it
            // must outlive every signal this OS thread may take).
            unsafe {
                let mut current: libc::stack_t = std::mem::zeroed();
                libc::sigaltstack(std::ptr::null(), &mut current);
                if current.ss_flags & libc::SS_DISABLE != 0 {
                    let size = 64 * 1024;
                    let stack = Box::leak(vec![0u8; size].into_boxed_slice());
                    let new = libc::stack_t {
                        ss_sp: stack.as_mut_ptr().cast(),
                        ss_flags: 0,
                        ss_size: size,
                    };
                    libc::sigaltstack(&new, std::ptr::null_mut());
                }
            }
            ALT_STACK.with(|a| a.set(true));
        }
    }

    extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
        let addr = unsafe { (*info).si_addr() } as usize;
        let armed = ARMED.with(Cell::take);
        if let Some(armed) = armed
            .as_ref()
            .filter(|a| addr >= a.guard.0 && addr < a.guard.1)
        {
            // SAFETY: the fault is in the running coroutine's guard page, so the interrupted
            // context is that coroutine; its stack is reset and it returns `StackOverflow`
            // (a zero-sized box: nothing is allocated on the way out).
            let regs = unsafe {
                armed
                    .trap
                    .setup_trap_handler(|| -> ThreadResult { Err(Box::new(StackOverflow)) })
            };
            // SAFETY: `ctx` is the interrupted ucontext; the registers are set as corosensei
            // requires for the trampoline to run.
            unsafe { set_registers(ctx.cast(), regs) };
            return;
        }
        ARMED.with(|a| a.set(armed));
        // Not ours: hand the fault to the previous handler, or restore it and return so that
        // the fault repeats under it (the default action: the process ends with the signal).
        let Some(previous) = PREVIOUS.get() else {
            return;
        };
        let previous = &previous[usize::from(sig != libc::SIGSEGV)];
        // SAFETY: calling or reinstalling the handler that was installed before ours.
        unsafe {
            if previous.sa_flags & libc::SA_SIGINFO != 0
                && previous.sa_sigaction != libc::SIG_DFL
                && previous.sa_sigaction != libc::SIG_IGN
            {
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(previous.sa_sigaction);
                handler(sig, info, ctx);
            } else {
                libc::sigaction(sig, previous, std::ptr::null_mut());
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    unsafe fn set_registers(ctx: *mut libc::ucontext_t, regs: corosensei::trap::TrapHandlerRegs) {
        let corosensei::trap::TrapHandlerRegs {
            rip,
            rsp,
            rbp,
            rdi,
            rsi,
        } = regs;
        // SAFETY: the caller passes the interrupted context.
        let gregs = unsafe { &mut (*ctx).uc_mcontext.gregs };
        gregs[libc::REG_RIP as usize] = rip as i64;
        gregs[libc::REG_RSP as usize] = rsp as i64;
        gregs[libc::REG_RBP as usize] = rbp as i64;
        gregs[libc::REG_RDI as usize] = rdi as i64;
        gregs[libc::REG_RSI as usize] = rsi as i64;
    }

    #[cfg(target_arch = "aarch64")]
    unsafe fn set_registers(ctx: *mut libc::ucontext_t, regs: corosensei::trap::TrapHandlerRegs) {
        let corosensei::trap::TrapHandlerRegs {
            pc,
            sp,
            x0,
            x1,
            x29,
            lr,
        } = regs;
        // SAFETY: the caller passes the interrupted context.
        let m = unsafe { &mut (*ctx).uc_mcontext };
        m.pc = pc;
        m.sp = sp;
        m.regs[0] = x0;
        m.regs[1] = x1;
        m.regs[29] = x29;
        m.regs[30] = lr;
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod imp {
    pub(super) fn install() {}
}
