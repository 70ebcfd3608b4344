//! Standard output that ends quietly when its reader goes away.
//!
//! `println!` panics when stdout is a pipe whose reader closed
//! (`splitkv sim … | head`): Rust ignores SIGPIPE, so the write fails with
//! `BrokenPipe` and the macro turns that into a panic with a backtrace
//! hint. [`outln!`] and [`out!`] write the same text, and on a broken pipe
//! end the process with exit code 0 at once, as a shell tool stopped by
//! SIGPIPE would, without a message; any other write error is reported on
//! stderr (exit [`EXIT_INTERNAL`](crate::EXIT_INTERNAL)).

use std::fmt::Arguments;
use std::io::{ErrorKind, Write};

/// Writes `args` to stdout (and flushes, so a reader sees each line as it
/// is made); see the module docs for what a failed write does.
pub fn write(args: Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_fmt(args).and_then(|()| stdout.flush());
    if let Err(e) = written {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("splitkv: cannot write to standard output: {e}");
        std::process::exit(crate::EXIT_INTERNAL.into());
    }
}

/// `println!` for the CLI's output: see the module docs.
macro_rules! outln {
    () => { $crate::out::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::write(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` for the CLI's output: see the module docs.
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::write(format_args!($($arg)*)) };
}
