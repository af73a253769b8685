//! Progress of a long job (loading millions of keys) on stderr: on a terminal, one line
//! redrawn in place with `\r` showing the count done, the rate and the time left; otherwise
//! (a log file, CI) a plain line every 10 %, so logs stay short and readable.
//!
//! Rendering is a pure function of the counts and the elapsed time, tested without a clock.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::report::{duration, si};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// One line, redrawn in place (a terminal).
    Bar,
    /// A new line at every 10 % (a pipe or a file).
    Lines,
    /// Nothing.
    Hidden,
}

/// Least time between two redraws of the bar.
const REDRAW_INTERVAL: Duration = Duration::from_millis(100);
/// Characters in the bar itself.
const BAR_WIDTH: usize = 30;

/// A progress display for `total` units of work.
pub struct Progress {
    label: String,
    unit: &'static str,
    total: u64,
    style: Style,
    out: Box<dyn Write + Send>,
    start: Instant,
    last_draw: Option<Instant>,
    /// `set` looks at the clock only from this count on (the clock costs ~20 ns a call).
    next_check: u64,
    /// The next tenth (1..=9) to print in `Lines` style.
    next_tenth: u64,
    /// Characters of the bar line last drawn, to blank them out when the line gets shorter.
    drawn_width: usize,
    finished: bool,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("label", &self.label)
            .field("total", &self.total)
            .field("style", &self.style)
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// Progress on stderr: a redrawn bar on a terminal, lines every 10 % otherwise.
    pub fn stderr(label: &str, unit: &'static str, total: u64) -> Self {
        let style = if std::io::stderr().is_terminal() { Style::Bar } else { Style::Lines };
        Progress::new(label, unit, total, style, Box::new(std::io::stderr()))
    }

    /// Progress shown nowhere.
    pub fn hidden(total: u64) -> Self {
        Progress::new("", "", total, Style::Hidden, Box::new(std::io::sink()))
    }

    pub fn new(
        label: &str,
        unit: &'static str,
        total: u64,
        style: Style,
        out: Box<dyn Write + Send>,
    ) -> Self {
        Progress {
            label: label.to_owned(),
            unit,
            total,
            style,
            out,
            start: Instant::now(),
            last_draw: None,
            next_check: 1,
            next_tenth: 1,
            drawn_width: 0,
            finished: false,
        }
    }

    /// Records that `done` units are finished. Cheap: most calls return at once.
    pub fn set(&mut self, done: u64) {
        if done < self.next_check || self.style == Style::Hidden {
            return;
        }
        let now = Instant::now();
        let elapsed = now - self.start;
        match self.style {
            Style::Bar => {
                if self.last_draw.is_none_or(|last| now - last >= REDRAW_INTERVAL) {
                    let line = render_bar(&self.label, self.unit, done, self.total, elapsed);
                    self.draw_in_place(&line);
                    self.last_draw = Some(now);
                }
            }
            Style::Lines => {
                if self.next_tenth <= 9 && done * 10 >= self.next_tenth * self.total {
                    let line = render_line(&self.label, self.unit, done, self.total, elapsed);
                    let _ = writeln!(self.out, "{line}");
                    while self.next_tenth <= 9 && done * 10 >= self.next_tenth * self.total {
                        self.next_tenth += 1;
                    }
                }
            }
            Style::Hidden => {}
        }
        // Look at the clock again in about 20 ms, and at least every 1 % of the work.
        let rate = done as f64 / elapsed.as_secs_f64().max(1e-6);
        let step = ((rate * 0.02) as u64).clamp(1, (self.total / 100).max(1));
        self.next_check = done.saturating_add(step);
    }

    /// Ends the display with a final line saying how long the whole job took.
    pub fn finish(&mut self) {
        if self.finished || self.style == Style::Hidden {
            return;
        }
        self.finished = true;
        let line = render_done(&self.label, self.unit, self.total, self.start.elapsed());
        if self.style == Style::Bar {
            self.draw_in_place(&line);
            let _ = writeln!(self.out);
        } else {
            let _ = writeln!(self.out, "{line}");
        }
        let _ = self.out.flush();
    }

    fn draw_in_place(&mut self, line: &str) {
        let width = line.chars().count();
        let blank = self.drawn_width.saturating_sub(width);
        let _ = write!(self.out, "\r{line}{:blank$}", "");
        let _ = self.out.flush();
        self.drawn_width = width;
    }
}

fn percent(done: u64, total: u64) -> f64 {
    if total == 0 {
        100.0
    } else {
        done as f64 * 100.0 / total as f64
    }
}

/// The rate and the time left, or dashes while nothing is known yet.
fn rate_and_eta(done: u64, total: u64, elapsed: Duration) -> (String, String) {
    let seconds = elapsed.as_secs_f64();
    if done == 0 || seconds <= 0.0 {
        return ("--".to_owned(), "--".to_owned());
    }
    let rate = done as f64 / seconds;
    let left = total.saturating_sub(done) as f64 / rate;
    (si(rate), duration(left))
}

/// The bar line: `loading [#########.....]  33.3%  1066666/3200000 keys  412k keys/s  ETA 5.2 s`.
pub fn render_bar(label: &str, unit: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let done = done.min(total);
    let pct = percent(done, total);
    let filled = ((pct / 100.0) * BAR_WIDTH as f64) as usize;
    let bar: String = (0..BAR_WIDTH).map(|i| if i < filled { '#' } else { '.' }).collect();
    let (rate, eta) = rate_and_eta(done, total, elapsed);
    format!("{label} [{bar}] {pct:5.1}%  {done}/{total} {unit}  {rate} {unit}/s  ETA {eta}")
}

/// A plain progress line: `loading: 30% (960000/3200000 keys), 412k keys/s, ETA 5.4 s`.
pub fn render_line(label: &str, unit: &str, done: u64, total: u64, elapsed: Duration) -> String {
    let done = done.min(total);
    // Whole percents, rounded down: the line printed just past 30 % says 30 %.
    let pct = percent(done, total).floor();
    let (rate, eta) = rate_and_eta(done, total, elapsed);
    format!("{label}: {pct:.0}% ({done}/{total} {unit}), {rate} {unit}/s, ETA {eta}")
}

/// The final line: `loading: 3200000 keys in 7.8 s (412k keys/s)`.
pub fn render_done(label: &str, unit: &str, total: u64, elapsed: Duration) -> String {
    let rate = total as f64 / elapsed.as_secs_f64().max(1e-9);
    format!(
        "{label}: {total} {unit} in {} ({} {unit}/s)",
        duration(elapsed.as_secs_f64()),
        si(rate)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer whose bytes the test can read afterwards.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    #[test]
    fn bar_shows_count_rate_and_eta() {
        let line = render_bar("loading", "keys", 1_000_000, 4_000_000, Duration::from_secs(2));
        assert_eq!(
            line,
            "loading [#######.......................]  25.0%  1000000/4000000 keys  \
             500k keys/s  ETA 6.0 s"
        );
        let start = render_bar("loading", "keys", 0, 10, Duration::ZERO);
        assert!(start.contains("  0.0%") && start.ends_with("-- keys/s  ETA --"), "{start}");
        let full = render_bar("loading", "keys", 10, 10, Duration::from_secs(1));
        assert!(full.contains(&"#".repeat(BAR_WIDTH)) && full.contains("100.0%"), "{full}");
    }

    #[test]
    fn line_and_done_formats() {
        let line = render_line("loading", "keys", 960_000, 3_200_000, Duration::from_secs(3));
        assert_eq!(line, "loading: 30% (960000/3200000 keys), 320k keys/s, ETA 7.0 s");
        let done = render_done("loading", "keys", 3_200_000, Duration::from_secs(8));
        assert_eq!(done, "loading: 3200000 keys in 8.0 s (400k keys/s)");
    }

    #[test]
    fn lines_style_prints_each_tenth_once_then_a_final_line() {
        let out = Shared::default();
        let mut progress =
            Progress::new("loading", "keys", 1_000, Style::Lines, Box::new(out.clone()));
        for done in 1..=1_000 {
            progress.set(done);
        }
        progress.finish();
        progress.finish();
        let text = out.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 10, "{text}");
        for (i, line) in lines[..9].iter().enumerate() {
            assert!(line.starts_with(&format!("loading: {}% ", (i + 1) * 10)), "{line}");
        }
        assert!(lines[9].starts_with("loading: 1000 keys in "), "{text}");
        assert!(!text.contains('\r'));
    }

    #[test]
    fn bar_style_redraws_one_line() {
        let out = Shared::default();
        let mut progress = Progress::new("loading", "keys", 50, Style::Bar, Box::new(out.clone()));
        for done in 1..=50 {
            progress.set(done);
        }
        progress.finish();
        let text = out.text();
        assert!(text.starts_with('\r'), "{text:?}");
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        assert!(text.trim_end().ends_with(")"), "{text:?}");
        let last = text.rsplit('\r').next().unwrap();
        assert!(last.starts_with("loading: 50 keys in "), "{last:?}");
    }

    #[test]
    fn hidden_and_empty_totals_print_nothing_odd() {
        let mut hidden = Progress::hidden(10);
        hidden.set(5);
        hidden.finish();
        let out = Shared::default();
        let mut empty = Progress::new("x", "keys", 0, Style::Lines, Box::new(out.clone()));
        empty.finish();
        assert_eq!(out.text(), "x: 0 keys in 0 ms (0 keys/s)\n");
    }
}
