//! `--timeline FILE`: throughput over time across faults and recovery, drawn
//! as PNG and SVG with `plotters`, with the run's events (a kill, an epoch
//! change, recovery or re-replication done, the end of the warm-up) as
//! vertical marks, and the samples as CSV next to them.
//!
//! A bench samples the cluster's cumulative committed count at a fixed
//! interval ([`SAMPLE_INTERVAL`]) with [`Timeline::sample`], marks events
//! with [`Timeline::event`], and calls [`Timeline::write`] once at the end;
//! the plot shows committed transactions per second over each interval
//! between two samples. Times are from the start of the run (the cluster's
//! clock), in seconds on the plot. Events are kept in time order, whatever
//! the order they were marked in.
//!
//! Labels never overlap: each event's vertical mark gets a numbered marker
//! at the top of the plot, staggered over rows when events are close, and
//! its number, time and label are listed in a legend beside the plot
//! ([`labels`]).
//!
//! No system fonts: text is drawn with `ab_glyph` from DejaVu Sans Mono,
//! bundled in `host/cli/assets/` (its licence beside it) and registered with
//! plotters at the first write.

mod labels;

use crate::Failure;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{register_font, FontStyle};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// How often a bench samples the committed count for the timeline.
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(100);
/// Most samples kept (an hour at [`SAMPLE_INTERVAL`]); later ones are
/// dropped and counted.
pub const SAMPLES_MAX: usize = 36_000;
/// Most events kept; later ones are dropped and counted.
pub const EVENTS_MAX: usize = 256;
/// Longest event label kept (bytes; longer ones are cut at a character).
pub const LABEL_BYTES_MAX: usize = 48;
/// Size of the PNG (pixels) and of the SVG's view box.
pub const PLOT_SIZE_PX: (u32, u32) = (1200, 600);
/// Width of the legend of events beside the plot (px).
pub const LEGEND_WIDTH_PX: u32 = 380;
/// Font size of the caption, and of labels and event marks (px).
const CAPTION_FONT_PX: u32 = 22;
const LABEL_FONT_PX: u32 = 14;
/// The family name the bundled font is registered under (plotters' default).
const FONT_FAMILY: &str = "sans-serif";
/// The bundled font (DejaVu Sans Mono; `assets/DejaVuSansMono.LICENSE`).
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
/// The name of the throughput series (legend, SVG text, CSV header).
pub const SERIES_NAME: &str = "committed tx/s";

/// Why a timeline could not be written.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// plotters failed to draw or encode the plot.
    #[error("cannot draw {}: {detail}", path.display())]
    Draw {
        /// The file being drawn.
        path: PathBuf,
        /// plotters' message.
        detail: String,
    },
    /// The bundled font did not parse.
    #[error("the bundled plot font did not load")]
    Font,
}

/// The files [`Timeline::write`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The plot as PNG.
    pub png: PathBuf,
    /// The plot as SVG.
    pub svg: PathBuf,
    /// The samples and events as CSV.
    pub csv: PathBuf,
}

/// Throughput over one run: cumulative committed counts at sample times,
/// and labelled events. Bounded by [`SAMPLES_MAX`] and [`EVENTS_MAX`].
#[derive(Debug, Clone)]
pub struct Timeline {
    title: String,
    /// `(seconds since the start, committed so far)`, times non-decreasing.
    samples: Vec<(f64, u64)>,
    /// `(seconds since the start, label)`.
    events: Vec<(f64, String)>,
    dropped_samples: u64,
    dropped_events: u64,
}

impl Timeline {
    /// An empty timeline whose plot is captioned `title`.
    pub fn new(title: impl Into<String>) -> Timeline {
        Timeline {
            title: title.into(),
            samples: Vec::with_capacity(1024),
            events: Vec::new(),
            dropped_samples: 0,
            dropped_events: 0,
        }
    }

    /// Records that `committed_total` transactions had committed by time `t`
    /// (since the start of the run). A sample earlier than the last one, or
    /// beyond [`SAMPLES_MAX`], is dropped and counted.
    pub fn sample(&mut self, t: Duration, committed_total: u64) {
        let secs = t.as_secs_f64();
        let late = self.samples.last().is_some_and(|&(last, _)| secs < last);
        if late || self.samples.len() >= SAMPLES_MAX {
            self.dropped_samples += 1;
            return;
        }
        self.samples.push((secs, committed_total));
    }

    /// Marks an event at time `t` (since the start of the run), such as
    /// "node 2 killed" or "epoch 3"; the label is cut to
    /// [`LABEL_BYTES_MAX`]. Beyond [`EVENTS_MAX`] events it is dropped and
    /// counted.
    pub fn event(&mut self, t: Duration, label: &str) {
        if self.events.len() >= EVENTS_MAX {
            self.dropped_events += 1;
            return;
        }
        let mut cut = label.len().min(LABEL_BYTES_MAX);
        while !label.is_char_boundary(cut) {
            cut -= 1;
        }
        let secs = t.as_secs_f64();
        // Kept in time order (a node's clock may date an event before
        // one marked earlier); equal times keep their order of marking.
        let at = self.events.partition_point(|e| e.0 <= secs);
        self.events.insert(at, (secs, label[..cut].to_string()));
    }

    /// Samples kept.
    pub fn samples(&self) -> usize {
        self.samples.len()
    }

    /// Samples and events dropped (out of order or over their bound).
    pub fn dropped(&self) -> (u64, u64) {
        (self.dropped_samples, self.dropped_events)
    }

    /// Committed transactions per second over each interval between two
    /// samples, at the interval's end: `(seconds, tx/s)`. A count that went
    /// down (a restarted node's counters) counts as no commit.
    pub fn rates(&self) -> Vec<(f64, f64)> {
        self.samples
            .windows(2)
            .filter(|w| w[1].0 > w[0].0)
            .map(|w| {
                let commits = w[1].1.saturating_sub(w[0].1) as f64;
                (w[1].0, commits / (w[1].0 - w[0].0))
            })
            .collect()
    }

    /// Writes the plot to `<base>.png` and `<base>.svg` and the samples and
    /// events to `<base>.csv`, where `<base>` is `path` without a `.png`,
    /// `.svg` or `.csv` extension (`run.png` and `run` both give `run.*`).
    ///
    /// # Errors
    /// [`TimelineError`]: a file that cannot be written, a plot plotters
    /// cannot draw, or a bundled font that does not load.
    pub fn write(&self, path: &Path) -> Result<Written, TimelineError> {
        let base = match path.extension().and_then(|e| e.to_str()) {
            Some("png" | "svg" | "csv") => path.with_extension(""),
            _ => path.to_path_buf(),
        };
        let with = |ext: &str| {
            let mut p = base.clone().into_os_string();
            p.push(".");
            p.push(ext);
            PathBuf::from(p)
        };
        let written = Written {
            png: with("png"),
            svg: with("svg"),
            csv: with("csv"),
        };
        register_bundled_font()?;
        let rates = self.rates();
        let draw_err = |path: &Path| {
            let path = path.to_path_buf();
            move |detail: String| TimelineError::Draw { path, detail }
        };
        let png = BitMapBackend::new(&written.png, PLOT_SIZE_PX).into_drawing_area();
        self.draw(png, &rates).map_err(draw_err(&written.png))?;
        let svg = SVGBackend::new(&written.svg, PLOT_SIZE_PX).into_drawing_area();
        self.draw(svg, &rates).map_err(draw_err(&written.svg))?;
        std::fs::write(&written.csv, self.csv(&rates)).map_err(|source| TimelineError::Io {
            path: written.csv.clone(),
            source,
        })?;
        Ok(written)
    }

    /// [`Timeline::write`] for a bench: names the files written (and any
    /// samples or events dropped) on stderr, since stdout may hold the JSON
    /// report; a failure is [`Failure::BadInput`] (the path given).
    pub fn write_reported(&self, path: &Path) -> Result<Written, Failure> {
        let w = self
            .write(path)
            .map_err(|e| Failure::BadInput(e.to_string()))?;
        eprintln!(
            "timeline written to {}, {} and {} ({} samples)",
            w.png.display(),
            w.svg.display(),
            w.csv.display(),
            self.samples()
        );
        let (samples, events) = self.dropped();
        if samples + events > 0 {
            eprintln!("timeline: {samples} samples and {events} events dropped (out of order or over their bounds)");
        }
        Ok(w)
    }

    /// The CSV: one `sample` row per sample (its rate over the interval it
    /// ends; empty for the first), one `event` row per event.
    fn csv(&self, rates: &[(f64, f64)]) -> String {
        let mut out = String::from("kind,t_s,committed_total,committed_per_s,label\n");
        let mut next_rate = rates.iter().peekable();
        for &(t, total) in &self.samples {
            let rate = match next_rate.peek() {
                Some(&&(rt, r)) if rt == t => {
                    next_rate.next();
                    format!("{r:.1}")
                }
                _ => String::new(),
            };
            let _ = writeln!(out, "sample,{t:.3},{total},{rate},");
        }
        for (t, label) in &self.events {
            let label = label.replace([',', '\n', '"'], " ");
            let _ = writeln!(out, "event,{t:.3},,,{label}");
        }
        out
    }

    /// Draws the throughput line and the event marks on `root`, the
    /// events' numbered markers and their legend beside the plot (placed
    /// by [`labels::layout`], so no two labels overlap), then writes it
    /// out (plotters' `present`).
    fn draw<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
        rates: &[(f64, f64)],
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let (plot_area, _) = root.split_horizontally(PLOT_SIZE_PX.0 - LEGEND_WIDTH_PX);
        let t_end = rates
            .iter()
            .map(|r| r.0)
            .chain(self.events.iter().map(|ev| ev.0))
            .fold(SAMPLE_INTERVAL.as_secs_f64(), f64::max)
            * 1.02;
        // Headroom above the highest rate for the rows of markers.
        let rate_max = rates.iter().map(|r| r.1).fold(1.0, f64::max) * 1.3;
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(&self.title, (FONT_FAMILY, CAPTION_FONT_PX))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..t_end, 0f64..rate_max)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("time since start (s)")
            .y_desc(SERIES_NAME)
            .label_style((FONT_FAMILY, LABEL_FONT_PX))
            .y_label_formatter(&|v| format!("{v:.0}"))
            .draw()
            .map_err(e)?;
        let line = BLUE.stroke_width(2);
        chart
            .draw_series(LineSeries::new(rates.iter().copied(), line))
            .map_err(e)?
            .label(SERIES_NAME)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], line));
        let mark = RED.stroke_width(1);
        chart
            .draw_series(
                (self.events.iter())
                    .map(|(t, _)| PathElement::new(vec![(*t, 0.0), (*t, rate_max)], mark)),
            )
            .map_err(e)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT_FAMILY, LABEL_FONT_PX))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
        let layout = self.label_layout(chart.plotting_area());
        draw_labels(&root, &layout).map_err(e)?;
        root.present().map_err(e)
    }
}

impl Timeline {
    /// Where the events' labels go ([`labels::layout`]): markers in the
    /// plotting `area`, the legend right of the chart.
    fn label_layout<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    ) -> labels::LabelLayout {
        let (xs, ys) = area.get_pixel_range();
        let plot = labels::Rect {
            x0: xs.start,
            y0: ys.start,
            x1: xs.end,
            y1: ys.end,
        };
        let marks: Vec<labels::Mark> = (self.events.iter())
            .map(|(t, label)| labels::Mark {
                t: *t,
                x: area.map_coordinate(&(*t, 0.0)).0,
                label,
            })
            .collect();
        let legend = labels::Rect {
            x0: (PLOT_SIZE_PX.0 - LEGEND_WIDTH_PX) as i32 + 8,
            y0: plot.y0,
            x1: PLOT_SIZE_PX.0 as i32 - 8,
            y1: PLOT_SIZE_PX.1 as i32 - 8,
        };
        labels::layout(&marks, plot, legend)
    }
}

/// Draws the markers (number in a white box edged red) and the legend's
/// lines of `layout` on `root` (pixel coordinates).
fn draw_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    layout: &labels::LabelLayout,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = |c: &RGBColor| {
        (FONT_FAMILY, LABEL_FONT_PX)
            .into_font()
            .color(c)
            .pos(Pos::new(HPos::Left, VPos::Top))
    };
    let text = |r: &labels::Rect, s: &str, c: &RGBColor| {
        Text::new(s.to_string(), (r.x0 + 3, r.y0 + 2), font(c))
    };
    root.draw(&text(&layout.heading.0, &layout.heading.1, &BLACK))?;
    for p in &layout.placed {
        if let Some(r) = &p.marker {
            let corners = [(r.x0, r.y0), (r.x1 - 1, r.y1 - 1)];
            root.draw(&Rectangle::new(corners, WHITE.filled()))?;
            root.draw(&Rectangle::new(corners, RED.stroke_width(1)))?;
            root.draw(&text(r, &p.number.to_string(), &RED))?;
        }
        root.draw(&text(&p.entry, &p.text, &BLACK))?;
    }
    if let Some((r, s)) = &layout.more {
        root.draw(&text(r, s, &BLACK))?;
    }
    Ok(())
}

/// Checks, before a run, that `path`'s directory exists, so a bad
/// `--timeline` fails at once rather than after the run.
///
/// # Errors
/// [`Failure::BadInput`] naming the directory.
pub fn check_path(path: &Path) -> Result<(), Failure> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(Failure::BadInput(format!(
            "cannot write the timeline {}: {} is not a directory",
            path.display(),
            dir.display()
        )))
    }
}

/// Registers the bundled font under [`FONT_FAMILY`] once per process.
fn register_bundled_font() -> Result<(), TimelineError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| register_font(FONT_FAMILY, FontStyle::Normal, FONT_BYTES).is_ok());
    if ok {
        Ok(())
    } else {
        Err(TimelineError::Font)
    }
}

/// Samples a running in-process cluster into a [`Timeline`]: call
/// [`ClusterSampler::tick`] from the bench's progress callback (every
/// `PROGRESS_PERIOD` of the threaded driver); it takes the published
/// committed count every [`SAMPLE_INTERVAL`] of the cluster's clock, and
/// marks a peer a node's session declared failed as an event.
#[derive(Debug)]
pub struct ClusterSampler {
    timeline: Timeline,
    next: Duration,
    /// Failed-peer reports already marked, by node entry.
    suspicions: Vec<usize>,
}

impl ClusterSampler {
    /// A sampler filling `timeline`.
    pub fn new(timeline: Timeline) -> ClusterSampler {
        ClusterSampler {
            timeline,
            next: Duration::ZERO,
            suspicions: Vec::new(),
        }
    }

    /// Samples `cluster` if [`SAMPLE_INTERVAL`] has passed on its clock since
    /// the last sample.
    pub fn tick(&mut self, cluster: &splitkv_host::cluster::Cluster) {
        let now = Duration::from_nanos(cluster.now());
        if now < self.next {
            return;
        }
        // Keep to the interval's grid unless a tick came very late.
        self.next = (self.next + SAMPLE_INTERVAL).max(now);
        let stats = cluster.stats();
        self.timeline.sample(now, stats.committed());
        self.suspicions.resize(stats.nodes.len(), 0);
        for (seen, n) in self.suspicions.iter_mut().zip(&stats.nodes) {
            for peer in n.failed_peers.iter().skip(*seen) {
                let label = format!("node {} suspects {peer}", n.node);
                self.timeline.event(now, &label);
            }
            *seen = n.failed_peers.len().max(*seen);
        }
    }

    /// The timeline, after a last sample of the stopped cluster `parts`
    /// (exact counters) and an event `label` at its clock's time.
    pub fn finish(mut self, parts: &splitkv_host::cluster::ClusterParts, label: &str) -> Timeline {
        let now = Duration::from_nanos(parts.now());
        self.timeline.sample(now, parts.stats().committed());
        self.timeline.event(now, label);
        self.timeline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn rates_are_commits_per_second_over_each_interval() {
        let mut t = Timeline::new("t");
        t.sample(ms(0), 0);
        t.sample(ms(100), 50);
        t.sample(ms(300), 250);
        t.sample(ms(400), 100); // a restarted node's counters: no commit
        let want = [(0.1, 500.0), (0.3, 1000.0), (0.4, 0.0)];
        let got = t.rates();
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g.0 - w.0).abs() < 1e-9 && (g.1 - w.1).abs() < 1e-6,
                "{got:?}"
            );
        }
    }

    #[test]
    fn out_of_order_and_excess_samples_and_events_are_dropped_and_counted() {
        let mut t = Timeline::new("t");
        t.sample(ms(200), 1);
        t.sample(ms(100), 2);
        assert_eq!((t.samples(), t.dropped()), (1, (1, 0)));
        for i in 0..SAMPLES_MAX as u64 {
            t.sample(ms(200 + i), i);
        }
        assert_eq!(t.samples(), SAMPLES_MAX);
        assert_eq!(t.dropped(), (2, 0));
        for _ in 0..=EVENTS_MAX {
            t.event(ms(1), "e");
        }
        assert_eq!(t.dropped(), (2, 1));
    }

    #[test]
    fn labels_are_cut_at_a_character_boundary() {
        let mut t = Timeline::new("t");
        let long = "é".repeat(LABEL_BYTES_MAX);
        t.event(ms(1), &long);
        let kept = &t.events[0].1;
        assert!(kept.len() <= LABEL_BYTES_MAX && !kept.is_empty());
        assert!(long.starts_with(kept.as_str()));
    }

    #[test]
    fn write_names_the_three_files_after_the_base() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Timeline::new("caption");
        t.sample(ms(0), 0);
        t.sample(ms(100), 10);
        t.event(ms(50), "node 2 killed");
        for given in ["run.png", "run.svg", "run"] {
            let w = t.write(&dir.path().join(given)).unwrap();
            assert_eq!(w.png, dir.path().join("run.png"));
            assert_eq!(w.svg, dir.path().join("run.svg"));
            assert_eq!(w.csv, dir.path().join("run.csv"));
        }
        let csv = std::fs::read_to_string(dir.path().join("run.csv")).unwrap();
        assert!(csv.contains("sample,0.100,10,100.0,"), "{csv}");
        assert!(csv.contains("event,0.050,,,node 2 killed"), "{csv}");
        let svg = std::fs::read_to_string(dir.path().join("run.svg")).unwrap();
        assert!(svg.contains("node 2 killed") && svg.contains(SERIES_NAME));
    }
}
