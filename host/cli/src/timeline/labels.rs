//! Where a timeline's event labels go, so that none overlaps another: each
//! event gets a number, drawn in a small box (its *marker*) at the top of
//! its vertical mark, and a line of the legend beside the plot (`number,
//! time, label`). Markers of events close in time are staggered over
//! [`MARKER_ROWS`] rows, then shifted right of their row's last marker;
//! what still does not fit is left out and counted ([`LabelLayout`]).
//!
//! [`layout`] is a pure function of the events' pixel positions and the
//! two areas: it measures text with the bundled monospace font's advance
//! ([`CHAR_W_PX`], rounded up), so what it places is what is drawn.

/// Width of one character of the label font (DejaVu Sans Mono at 14 px
/// advances 8.43 px; rounded up so a line never runs over its box).
pub const CHAR_W_PX: i32 = 9;
/// Height of one legend line and of a marker.
pub const LINE_H_PX: i32 = 18;
/// Rows of markers at the top of the plotting area.
pub const MARKER_ROWS: usize = 4;
/// Space between two markers of a row, and between marker rows.
const GAP_PX: i32 = 2;
/// Space inside a marker and a legend line, left and right of the text.
const PAD_PX: i32 = 3;

/// A rectangle of pixels, `x0..x1` by `y0..y1` (ends excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Left edge.
    pub x0: i32,
    /// Top edge.
    pub y0: i32,
    /// Right edge (excluded).
    pub x1: i32,
    /// Bottom edge (excluded).
    pub y1: i32,
}

impl Rect {
    /// Whether the two share a pixel.
    pub fn intersects(&self, o: &Rect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    /// Whether `o` lies wholly inside this one.
    pub fn contains(&self, o: &Rect) -> bool {
        self.x0 <= o.x0 && o.x1 <= self.x1 && self.y0 <= o.y0 && o.y1 <= self.y1
    }
}

/// One event to place: its time (s), the x pixel of its mark, its label.
#[derive(Debug, Clone, Copy)]
pub struct Mark<'a> {
    /// Seconds since the start of the run.
    pub t: f64,
    /// The x pixel of its vertical mark.
    pub x: i32,
    /// Its label.
    pub label: &'a str,
}

/// One event placed: its number, its marker's box (`None`: no room left in
/// the marker rows), and its legend line's box and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// Its number (from 1, in time order), in the marker and the legend.
    pub number: usize,
    /// The marker's box, where the number is drawn.
    pub marker: Option<Rect>,
    /// The legend line's box.
    pub entry: Rect,
    /// The legend line's text (cut to the legend's width).
    pub text: String,
}

/// Where every label goes ([`layout`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelLayout {
    /// The legend's heading: its box and text.
    pub heading: (Rect, String),
    /// The events that have a legend line, in time order.
    pub placed: Vec<Placed>,
    /// A last legend line saying how many events had none (those are in
    /// the CSV), if any had none.
    pub more: Option<(Rect, String)>,
}

impl LabelLayout {
    /// Every box drawn: the heading, markers, legend lines and the last line.
    pub fn boxes(&self) -> Vec<Rect> {
        let mut all = vec![self.heading.0];
        for p in &self.placed {
            all.extend(p.marker);
            all.push(p.entry);
        }
        all.extend(self.more.as_ref().map(|m| m.0));
        all
    }
}

/// Places the labels of `marks` (in time order): markers in the top rows
/// of `plot`, legend lines down `legend` (which must not meet `plot`).
/// Every box lies inside its area and no two boxes share a pixel.
pub fn layout(marks: &[Mark<'_>], plot: Rect, legend: Rect) -> LabelLayout {
    let line = |i: i32| Rect {
        x0: legend.x0,
        y0: legend.y0 + i * LINE_H_PX,
        x1: legend.x1,
        y1: legend.y0 + (i + 1) * LINE_H_PX,
    };
    let chars = ((legend.x1 - legend.x0 - 2 * PAD_PX) / CHAR_W_PX).max(0) as usize;
    let heading = (line(0), cut("events (s, label)", chars));
    let lines = ((legend.y1 - legend.y0) / LINE_H_PX - 1).max(0) as usize;
    let listed = match marks.len() > lines {
        true => lines.saturating_sub(1),
        false => marks.len(),
    };
    let digits = listed.max(1).to_string().len();
    let mut rows = Rows::new(plot);
    let placed = marks[..listed]
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let number = i + 1;
            let text = format!("{number:>digits$} {:7.2} {}", m.t, m.label);
            Placed {
                number,
                marker: rows.place(m.x, number.to_string().len()),
                entry: line(i as i32 + 1),
                text: cut(&text, chars),
            }
        })
        .collect();
    let more = (listed < marks.len()).then(|| {
        let text = format!("+ {} more events (in the CSV)", marks.len() - listed);
        (line(listed as i32 + 1), cut(&text, chars))
    });
    let l = LabelLayout {
        heading,
        placed,
        more,
    };
    debug_assert!(apart(&l.boxes()), "overlapping labels: {l:?}");
    l
}

/// Whether no two of `boxes` share a pixel.
fn apart(boxes: &[Rect]) -> bool {
    (boxes.iter().enumerate()).all(|(i, a)| boxes[i + 1..].iter().all(|b| !a.intersects(b)))
}

/// `text` cut to at most `chars` characters.
fn cut(text: &str, chars: usize) -> String {
    text.chars().take(chars).collect()
}

/// The marker rows: each row's right edge so far.
struct Rows {
    plot: Rect,
    right: [i32; MARKER_ROWS],
}

impl Rows {
    fn new(plot: Rect) -> Rows {
        Rows {
            plot,
            right: [plot.x0 - GAP_PX; MARKER_ROWS],
        }
    }

    /// A marker of `digits` characters for the mark at `x`: centred on it
    /// in the first row with room, else right of the row that ends
    /// first; `None` when even that runs past the plot.
    fn place(&mut self, x: i32, digits: usize) -> Option<Rect> {
        let w = digits as i32 * CHAR_W_PX + 2 * PAD_PX;
        let ideal = (x - w / 2).clamp(self.plot.x0, (self.plot.x1 - w).max(self.plot.x0));
        let row = match (0..MARKER_ROWS).find(|&r| self.right[r] + GAP_PX <= ideal) {
            Some(r) => r,
            None => (0..MARKER_ROWS).min_by_key(|&r| self.right[r])?,
        };
        let x0 = ideal.max(self.right[row] + GAP_PX);
        let y0 = self.plot.y0 + GAP_PX + row as i32 * (LINE_H_PX + GAP_PX);
        let r = Rect {
            x0,
            y0,
            x1: x0 + w,
            y1: y0 + LINE_H_PX,
        };
        if !self.plot.contains(&r) {
            return None;
        }
        self.right[row] = r.x1;
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLOT: Rect = Rect {
        x0: 96,
        y0: 54,
        x1: 824,
        y1: 540,
    };
    const LEGEND: Rect = Rect {
        x0: 850,
        y0: 54,
        x1: 1190,
        y1: 590,
    };

    /// Marks at `ts` (s) on a 10 s plot.
    fn marks(ts: &[f64]) -> Vec<Mark<'static>> {
        let span = f64::from(PLOT.x1 - PLOT.x0);
        ts.iter()
            .map(|&t| Mark {
                t,
                x: PLOT.x0 + (t / 10.0 * span) as i32,
                label: "replication restored without node 2 (a long one)",
            })
            .collect()
    }

    fn assert_apart(l: &LabelLayout) {
        let boxes = l.boxes();
        for (i, a) in boxes.iter().enumerate() {
            let inside = PLOT.contains(a) || LEGEND.contains(a);
            assert!(inside, "{a:?} outside both areas");
            for b in &boxes[i + 1..] {
                assert!(!a.intersects(b), "{a:?} meets {b:?}");
            }
        }
        for p in &l.placed {
            assert!(p.text.chars().count() as i32 * CHAR_W_PX <= LEGEND.x1 - LEGEND.x0);
        }
    }

    #[test]
    fn labels_of_events_close_in_time_do_not_overlap() {
        // A kill, its epoch and resume within milliseconds, a restart,
        // an admission, a copy and the restored degree: the run that drew
        // unreadable text.
        let ts = [2.0, 3.101, 3.102, 3.103, 4.0, 4.31, 4.312, 4.52, 4.521];
        let l = layout(&marks(&ts), PLOT, LEGEND);
        assert_apart(&l);
        assert_eq!(l.placed.len(), ts.len());
        assert!(l.placed.iter().all(|p| p.marker.is_some()));
        assert!(l.more.is_none());
        assert!(
            l.placed[0].text.starts_with("1    2.00 replication"),
            "{l:?}"
        );
    }

    #[test]
    fn many_events_at_one_time_are_listed_or_counted_and_never_overlap() {
        for n in [1, 5, 29, 30, 31, 60, 256] {
            let ts: Vec<f64> = (0..n).map(|i| 5.0 + f64::from(i) * 1e-4).collect();
            let l = layout(&marks(&ts), PLOT, LEGEND);
            assert_apart(&l);
            let more: usize = l.more.as_ref().map_or(0, |(_, t)| {
                t.split_whitespace().nth(1).unwrap().parse().unwrap()
            });
            assert_eq!(l.placed.len() + more, n as usize, "{n} events");
        }
    }

    #[test]
    fn events_spread_over_the_run_sit_at_their_marks() {
        let ts: Vec<f64> = (0..10).map(f64::from).collect();
        let l = layout(&marks(&ts), PLOT, LEGEND);
        assert_apart(&l);
        for (p, m) in l.placed.iter().zip(marks(&ts)) {
            let r = p.marker.unwrap();
            assert!(
                r.x0 <= m.x.max(PLOT.x0) && m.x < r.x1.max(PLOT.x0 + 1),
                "{r:?}"
            );
            assert_eq!(r.y0, PLOT.y0 + GAP_PX, "first row");
        }
    }
}
