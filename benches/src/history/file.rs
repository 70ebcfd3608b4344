//! Checking a history file: what `splitkv check history FILE` and the sim's
//! `check_history` example share. A file is Jepsen-shaped JSON lines
//! (`splitkv_check::history`), the same format external checkers (Elle, the
//! `adya` crate) read.

use splitkv_check::checker::{self, CheckOptions, CheckReport};
use splitkv_check::history::History;
use std::path::Path;

/// Why a history file could not be checked (bad input, not anomalies: those
/// are in the report).
#[derive(Debug, thiserror::Error)]
pub enum FileCheckError {
    /// The file could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A line is not a history operation.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// What was wrong.
        source: splitkv_check::history::HistoryError,
    },
    /// The history is malformed for the checker (unpaired operations, a
    /// broken precondition of the model).
    #[error("{path}: {source}")]
    Check {
        /// The file.
        path: String,
        /// What was wrong.
        source: checker::CheckError,
    },
}

/// Reads the history in `path` and checks it with `opts`; returns the history
/// and the checker's report (valid or not).
///
/// # Errors
/// [`FileCheckError`] when the file cannot be read or checked.
pub fn check_file(
    path: &Path,
    opts: &CheckOptions,
) -> Result<(History, CheckReport), FileCheckError> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| FileCheckError::Open {
        path: shown.clone(),
        source,
    })?;
    let history = History::read_jsonl(std::io::BufReader::new(file)).map_err(|source| {
        FileCheckError::Read {
            path: shown.clone(),
            source,
        }
    })?;
    let report = checker::check(&history, opts).map_err(|source| FileCheckError::Check {
        path: shown,
        source,
    })?;
    Ok((history, report))
}
