//! DPDK's Environment Abstraction Layer, initialised once per process.
//!
//! `rte_eal_init` may run only once in a process, and not again after it
//! failed; [`Eal::init`] runs it the first time and afterwards hands out the
//! same [`Eal`] for the same arguments (and a typed error for others, or the
//! first failure again). An [`Eal`] is the proof a port or mempool needs
//! that the layer is up.
//!
//! Arguments a splitkv process normally gives (the caller chooses):
//! `--no-telemetry` (components spawn no threads, so no telemetry thread
//! either), `--in-memory` or a per-process `--file-prefix NAME` (so two
//! processes on one machine are both primaries), `--lcores` or `-l` to
//! limit the lcores EAL creates, `--vdev` for virtual devices
//! (`net_ring`, `net_memif`, `net_af_packet`), and, without hugepages,
//! `--no-huge -m MEGABYTES` (DPDK 22.11 refuses `--in-memory` with
//! `--no-huge`: use `--no-shconf` or a `--file-prefix` then).
//!
//! `rte_eal_init` pins the calling thread to its main lcore's CPUs; drivers
//! own thread placement in splitkv, so [`Eal::init`] restores the calling
//! thread's CPU affinity afterwards.

use dpdk_sys as sys;
use std::ffi::{CStr, CString};
use std::sync::Mutex;

/// Program name passed as `argv[0]`.
const EAL_PROGRAM: &str = "splitkv";

/// Why `rte_eal_init` refused, from its `rte_errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EalCause {
    /// `EINVAL`: arguments EAL does not accept (an unknown option, a bad
    /// value, a plugin it cannot load).
    BadArguments,
    /// `EACCES`: no hugepage information (no hugepages mounted or no
    /// permission; `--no-huge` runs without them).
    Hugepages,
    /// `ENOMEM`: memory could not be set up (too little, or no hugepages free).
    Memory,
    /// `ENODEV`: the device buses could not be scanned.
    BusScan,
    /// `ENOTSUP`: a device could not be probed (e.g. a `--vdev` with
    /// arguments its driver refuses), or the CPU lacks what DPDK was built for.
    DeviceProbe,
    /// `EALREADY`: EAL was initialised outside this module.
    AlreadyInitialised,
    /// Anything else (`rte_errno` in [`EalError::Refused`]).
    Other,
}

impl EalCause {
    fn from_errno(errno: i32) -> EalCause {
        match errno {
            libc::EINVAL => EalCause::BadArguments,
            libc::EACCES => EalCause::Hugepages,
            libc::ENOMEM => EalCause::Memory,
            libc::ENODEV => EalCause::BusScan,
            libc::ENOTSUP => EalCause::DeviceProbe,
            libc::EALREADY => EalCause::AlreadyInitialised,
            _ => EalCause::Other,
        }
    }
}

/// Why EAL could not be initialised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EalError {
    /// An argument holds a NUL byte.
    #[error("EAL argument {arg:?} holds a NUL byte")]
    NulInArgument {
        /// The argument.
        arg: String,
    },
    /// `rte_eal_init` failed (now or at the process's first attempt, which
    /// cannot be retried).
    #[error("DPDK EAL initialisation failed ({cause:?}, rte_errno {errno}: {message}) with arguments {args:?}")]
    Refused {
        /// The cause, from `errno`.
        cause: EalCause,
        /// `rte_errno`.
        errno: i32,
        /// DPDK's text for it.
        message: String,
        /// The arguments given.
        args: Vec<String>,
    },
    /// EAL is already up with other arguments (it runs once per process).
    #[error("DPDK EAL already initialised in this process with {first:?}, not {asked:?}")]
    OtherArguments {
        /// The arguments it was initialised with.
        first: Vec<String>,
        /// The arguments asked for now.
        asked: Vec<String>,
    },
}

/// Proof that DPDK's EAL is initialised in this process. See the module
/// documentation.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
}

/// The outcome of the process's one `rte_eal_init`.
static EAL: Mutex<Option<Result<&'static Eal, EalError>>> = Mutex::new(None);

impl Eal {
    /// Initialises EAL with `args` (without `argv[0]`) the first time it is
    /// called in the process; later calls with the same arguments return
    /// the same [`Eal`]. Blocks while another thread initialises.
    ///
    /// # Errors
    /// [`EalError::NulInArgument`]; [`EalError::Refused`] when
    /// `rte_eal_init` fails (then every later call fails the same way);
    /// [`EalError::OtherArguments`] after a success with other arguments.
    pub fn init<S: AsRef<str>>(args: &[S]) -> Result<&'static Eal, EalError> {
        let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
        let mut state = EAL.lock().unwrap_or_else(|p| p.into_inner());
        match &*state {
            Some(Ok(eal)) if eal.args == args => return Ok(eal),
            Some(Ok(eal)) => {
                return Err(EalError::OtherArguments {
                    first: eal.args.clone(),
                    asked: args,
                })
            }
            Some(Err(e)) => return Err(e.clone()),
            None => {}
        }
        let c_args = std::iter::once(EAL_PROGRAM)
            .chain(args.iter().map(String::as_str))
            .map(|a| CString::new(a).map_err(|_| EalError::NulInArgument { arg: a.to_string() }))
            .collect::<Result<Vec<_>, _>>()?;
        let result = run_eal_init(c_args).map_err(|errno| EalError::Refused {
            cause: EalCause::from_errno(errno),
            errno,
            message: strerror(errno),
            args: args.clone(),
        });
        let result = result.map(|()| &*Box::leak(Box::new(Eal { args })));
        *state = Some(result.clone());
        result
    }

    /// The arguments EAL was initialised with (without `argv[0]`).
    pub fn args(&self) -> &[String] {
        &self.args
    }
}

/// Runs `rte_eal_init` on `args` (`argv[0]` first), keeping the calling
/// thread's CPU affinity. The strings are leaked: EAL may keep pointers into
/// `argv` for the life of the process. Returns `rte_errno` on failure.
fn run_eal_init(args: Vec<CString>) -> Result<(), i32> {
    let mut argv: Vec<*mut libc::c_char> = args.into_iter().map(CString::into_raw).collect();
    let argc = argv.len() as libc::c_int;
    argv.push(std::ptr::null_mut());
    let argv = Box::leak(argv.into_boxed_slice());
    let affinity = Affinity::of_this_thread();
    // SAFETY: argv holds argc NUL-terminated strings and a final NULL, all
    // leaked (valid for the process's life); this module calls
    // rte_eal_init at most once per process (the EAL mutex).
    let rc = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
    if let Some(a) = affinity {
        a.restore();
    }
    if rc < 0 {
        // SAFETY: reads the calling thread's rte_errno.
        Err(unsafe { sys::splitkv_dpdk_errno() })
    } else {
        Ok(())
    }
}

/// DPDK's text for an `rte_errno` value.
pub(super) fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror returns a pointer to a static or thread-local
    // NUL-terminated string, copied at once.
    unsafe { CStr::from_ptr(sys::rte_strerror(errno)) }
        .to_string_lossy()
        .into_owned()
}

/// A thread's CPU affinity mask, to put back after `rte_eal_init`.
struct Affinity(libc::cpu_set_t);

impl Affinity {
    fn of_this_thread() -> Option<Affinity> {
        // SAFETY: cpu_set_t is plain bits; all zeroes is a valid value, and
        // sched_getaffinity writes at most its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let rc = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            (rc == 0).then_some(Affinity(set))
        }
    }

    fn restore(&self) {
        // SAFETY: passes a valid cpu_set_t of its own size for this thread.
        // A refusal leaves EAL's pinning, which is harmless.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0);
        }
    }
}
