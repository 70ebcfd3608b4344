//! `splitkv bench ... --timeline FILE` (throughput over time across faults): a
//! short in-process run writes `FILE.png`, `FILE.svg` and `FILE.csv`; the PNG
//! is a whole PNG image, the SVG a whole SVG document holding the throughput
//! series (one polyline point per sampled interval) and the event marks, and
//! the CSV the samples, at the sampling interval, with commits in them; a
//! timeline whose directory does not exist is refused before the run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The sampling interval of `host/cli/src/timeline.rs` (ms).
const SAMPLE_INTERVAL_MS: f64 = 100.0;
/// The series colour plotters writes for the throughput line (BLUE).
const SERIES_STROKE: &str = "stroke=\"#0000FF\"";

fn splitkv(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_splitkv"))
        .args(args)
        .output()
        .expect("run splitkv")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("splitkv-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Checks the PNG's signature, that its first chunk is IHDR of the plot's
/// size, and that it ends with IEND.
fn assert_png(path: &Path) {
    let png = std::fs::read(path).unwrap();
    assert!(png.len() > 1000, "{} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert_eq!((width, height), (1200, 600));
    assert_eq!(
        &png[png.len() - 8..png.len() - 4],
        b"IEND",
        "PNG ends with IEND"
    );
}

/// Rows of the CSV: `(kind, t_s, committed_total, committed_per_s, label)`.
fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    let csv = std::fs::read_to_string(path).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("kind,t_s,committed_total,committed_per_s,label")
    );
    lines
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .inspect(|r| assert_eq!(r.len(), 5, "{r:?}"))
        .collect()
}

/// The points of the SVG's throughput polyline.
fn series_points(svg: &str) -> usize {
    let line = svg
        .lines()
        .find(|l| l.starts_with("<polyline") && l.contains(SERIES_STROKE))
        .expect("the throughput polyline");
    let points = line.split("points=\"").nth(1).unwrap();
    points.split('"').next().unwrap().split_whitespace().count()
}

/// Runs `args` with `--timeline <base>`; checks the three files and returns
/// the SVG text and the CSV rows.
fn run_with_timeline(args: &[&str], base: &Path) -> (String, Vec<Vec<String>>) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--timeline", base.to_str().unwrap()]);
    let out = splitkv(&all);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{all:?}: {err}");
    assert!(err.contains("timeline written to"), "{err}");
    assert_png(&base.with_extension("png"));
    let svg = std::fs::read_to_string(base.with_extension("svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
    assert!(svg.trim_end().ends_with("</svg>"));
    (svg, csv_rows(&base.with_extension("csv")))
}

#[test]
fn smallbank_with_timeline_writes_png_svg_and_csv_with_the_series() {
    let base = scratch("smallbank.png");
    let (svg, rows) = run_with_timeline(
        &[
            "bench",
            "smallbank",
            "--accounts-per-node",
            "1000",
            "--duration",
            "800ms",
            "--warmup",
            "200ms",
            "--json",
        ],
        &base,
    );
    let samples: Vec<_> = rows.iter().filter(|r| r[0] == "sample").collect();
    // One second at the interval, with slack for a loaded machine.
    assert!(samples.len() >= 5, "{} samples", samples.len());
    let times: Vec<f64> = samples.iter().map(|r| r[1].parse().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    let first_gap_ms = (times[1] - times[0]) * 1000.0;
    assert!(
        first_gap_ms >= SAMPLE_INTERVAL_MS * 0.9,
        "sampled every {first_gap_ms} ms"
    );
    let totals: Vec<u64> = samples.iter().map(|r| r[2].parse().unwrap()).collect();
    assert!(totals.windows(2).all(|w| w[0] <= w[1]), "{totals:?}");
    assert!(*totals.last().unwrap() > 0, "commits counted");
    let rates = samples.iter().filter(|r| !r[3].is_empty()).count();
    assert_eq!(series_points(&svg), rates, "one point per interval");
    assert!(svg.contains("committed tx/s"), "the series' legend");
    for event in ["warm-up done", "load stops", "threads stopped"] {
        assert!(svg.contains(event), "mark {event:?} in the SVG");
        assert!(
            rows.iter().any(|r| r[0] == "event" && r[4] == event),
            "event {event:?} in the CSV"
        );
    }
}

#[test]
fn list_append_with_timeline_writes_the_series() {
    let base = scratch("list-append");
    let (svg, rows) = run_with_timeline(
        &[
            "bench",
            "list-append",
            "--transactions",
            "200000",
            "--duration",
            "500ms",
        ],
        &base,
    );
    assert!(rows.iter().filter(|r| r[0] == "sample").count() >= 3);
    assert!(series_points(&svg) >= 2);
    assert!(svg.contains("list-append, 3 nodes"), "the caption");
}

#[test]
fn an_unwritable_timeline_exits_2_with_one_line() {
    let base = scratch("no-such-dir").join("run");
    let out = splitkv(&[
        "bench",
        "list-append",
        "--transactions",
        "50",
        "--timeline",
        base.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no-such-dir"), "{err}");
    assert!(out.stdout.is_empty(), "refused before the run");
}
