//! What a bench across processes prints besides the in-process bench's
//! report ([`crate::report`]): the fault lines.

/// Prints which node `--kill` killed and when (`line`), if one was: on
/// standard output, or standard error when standard output is JSON.
pub fn killed(line: Option<&str>, json: bool) {
    match line {
        Some(l) if json => eprintln!("{l}"),
        Some(l) => println!("{l}"),
        None => {}
    }
}
