//! `splitkv bench lookup`: Xenic Table 2 (objects read and DMA round trips
//! per NIC lookup at 90% occupancy, by maximum displacement D_m), beside the
//! paper's figures.

use crate::cli::LookupArgs;
use indicatif::{ProgressBar, ProgressStyle};
use splitkv_bench::lookup_report::D_MAX_UNLIMITED;

/// Xenic Table 2 (objects read, round trips) by D_m.
const XENIC_TABLE_2: [(usize, f64, f64); 4] = [
    (8, 3.43, 1.07),
    (16, 4.13, 1.04),
    (32, 4.84, 1.02),
    (4096, 6.39, 1.00),
];

/// Runs `splitkv bench lookup`: one row per D_m, as text or JSON.
pub fn run(args: &LookupArgs) -> Result<(), Box<dyn std::error::Error>> {
    use splitkv_bench::lookup_report::{run as measure, LookupSpec};
    let mut rows = Vec::new();
    for &d_max in &args.d_max {
        let bar = ProgressBar::new(0).with_style(
            ProgressStyle::with_template("D_m {prefix:>4} {msg:7} {bar:40} {pos}/{len}")
                .expect("valid template"),
        );
        bar.set_prefix(d_max.to_string());
        let spec = LookupSpec {
            keys: args.keys,
            d_max,
            segment_slots: args.segment_slots,
            warm: !args.cold,
            seed: args.seed,
        };
        let row = measure(&spec, |stage, done, total| {
            bar.set_message(stage.to_string());
            bar.set_length(total);
            bar.set_position(done);
        })?;
        bar.finish_and_clear();
        rows.push(row);
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    outln!(
        "NIC lookups at 90% occupancy ({} keys, {} home slots per segment, {} hints)",
        rows.first().map_or(0, |r| r.keys),
        args.segment_slots,
        if args.cold { "cold" } else { "warm" }
    );
    outln!(
        "{:>9} {:>10} {:>10} {:>12} {:>14} {:>12} {:>10}",
        "D_m",
        "objects",
        "trips",
        "paper obj",
        "paper trips",
        "overflow %",
        "mean d_i"
    );
    for r in &rows {
        let paper = XENIC_TABLE_2.iter().find(|p| p.0 == r.d_max);
        let d = if r.d_max == D_MAX_UNLIMITED {
            "unlimited".to_string()
        } else {
            r.d_max.to_string()
        };
        let (po, pt) = paper.map_or(("-".to_string(), "-".to_string()), |p| {
            (format!("{:.2}", p.1), format!("{:.2}", p.2))
        });
        outln!(
            "{:>9} {:>10.2} {:>10.3} {:>12} {:>14} {:>12.2} {:>10.2}",
            d,
            r.objects_read,
            r.round_trips,
            po,
            pt,
            100.0 * r.overflow_keys as f64 / r.keys as f64,
            r.d_known_mean
        );
    }
    Ok(())
}
