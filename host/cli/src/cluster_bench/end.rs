//! The end of a deployed run, the same for every bench: write the
//! timeline, take the fault lines, stop spawned nodes ([`Deployed::end`]);
//! build the checks' mirror of the nodes' rows ([`RunEnd::mirror`]); and,
//! after the bench's report, print the fault lines and `checks: ok`
//! ([`RunEnd::finish`]).

use super::nic_crash::NicCrash;
use super::Deployed;
use crate::Failure;
use splitkv_bench::remote::{Mirror, Results};
use splitkv_bench::{CheckError, Workload};
use splitkv_layout::wire::NodeMask;
use std::path::{Path, PathBuf};

/// What is left of a deployed run once its nodes are stopped: what its
/// checks and its last lines need.
pub(super) struct RunEnd {
    /// Nodes that died during the run.
    failed: NodeMask,
    /// The `--kill`, `--nic-crash` and `--restart`/`--replace` lines, each
    /// if that happened.
    lines: [Option<String>; 3],
    /// Where the clients' journals went.
    run_dir: Option<PathBuf>,
}

impl Deployed {
    /// Writes the timeline (if asked for), takes what the report needs,
    /// and stops spawned nodes.
    pub(super) fn end(mut self, timeline: Option<&Path>) -> Result<RunEnd, Failure> {
        self.write_timeline(timeline)?;
        let end = RunEnd {
            failed: self.failed(),
            lines: [
                self.killed_line(),
                self.nic_crash.as_ref().and_then(NicCrash::line),
                self.restart_line(),
            ],
            run_dir: self.run_dir.clone(),
        };
        self.close();
        Ok(end)
    }
}

impl RunEnd {
    /// The nodes' rows, for the checks across processes, read as the
    /// survivors serve them; a bad row set is [`Failure::Check`].
    pub(super) fn mirror<W: Workload>(
        &self,
        workload: &W,
        nodes: usize,
        replication: usize,
        results: &[Results],
    ) -> Result<Mirror, Failure> {
        Ok(Mirror::new(workload, nodes, replication, results)
            .map_err(|e| Failure::Check(e.to_string()))?
            .with_failed(self.failed))
    }

    /// After the report: its fault lines (on standard error when standard
    /// output is JSON), then the first failed of `checks` as
    /// [`Failure::Check`], or `checks: ok` and the run's directory removed
    /// (a failed run leaves it for a look).
    pub(super) fn finish(
        self,
        json: bool,
        checks: [Result<(), CheckError>; 2],
    ) -> Result<(), Failure> {
        for line in self.lines.iter().flatten() {
            if json {
                eprintln!("{line}");
            } else {
                outln!("{line}");
            }
        }
        for c in checks {
            c.map_err(|e| Failure::Check(e.to_string()))?;
        }
        outln!("checks: ok");
        if let Some(dir) = self.run_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
        Ok(())
    }
}
