//! Grouped bar charts of benchmark results, written as SVG.
//!
//! A [`BarChart`] is laid out once into a list of shapes in pixel coordinates (filled rectangles,
//! 1-pixel horizontal or vertical lines, text anchored on its baseline), which `report/svg.rs`
//! prints as XML.
//!
//! Layout of a chart (y grows downwards; the default size is 960x540):
//!
//! | where                        | what                                                   |
//! |------------------------------|--------------------------------------------------------|
//! | baseline 32, centred         | title, twice the labels' size                          |
//! | baselines 56, 74, ...        | legend: a square and a name per series, rows centred   |
//! | 28 px under the last legend  | top of the plot; the gap holds the tallest bar's label |
//! | left of the plot             | y label (vertical), tick labels, 4-px tick marks       |
//! | plot                         | grid line per tick, one cluster of bars per group      |
//! | 18 px under the plot         | group labels (the plot ends 40 px above the bottom)    |
//!
//! Each group gets an equal share of the plot width; its bars fill the middle 80 % of it, one
//! slot per series with a gap of a tenth of the slot between bars.

use std::path::{Path, PathBuf};

use super::svg;

/// Width of [`BarChart::to_svg`] pictures, in pixels.
pub const DEFAULT_WIDTH: u32 = 960;
/// Height of [`BarChart::to_svg`] pictures, in pixels.
pub const DEFAULT_HEIGHT: u32 = 540;
/// The smallest size the layout fits into.
const MIN_WIDTH: u32 = 320;
const MIN_HEIGHT: u32 = 200;

/// One chart: groups (for example workloads) along the x axis, one bar per series (for example
/// storage engine) in each group.
///
/// `values[group][series]`; a missing row or entry counts as `None`. Series take the colours of a
/// fixed palette in order (the first, rust orange, is meant for Ferrite), repeating after eight.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BarChart {
    pub title: String,
    /// What the y axis measures, for example "operations/s".
    pub y_label: String,
    /// The x-axis categories.
    pub groups: Vec<String>,
    /// The legend entries, one colour each.
    pub series: Vec<String>,
    /// `values[group][series]`; `None` = not measured: no bar, a small "n/a" mark.
    pub values: Vec<Vec<Option<f64>>>,
    /// The y axis is log10 when true; values <= 0 are then treated as missing.
    pub log_scale: bool,
}

impl BarChart {
    /// The chart as an SVG document of the default size.
    pub fn to_svg(&self) -> String {
        self.to_svg_sized(DEFAULT_WIDTH, DEFAULT_HEIGHT)
    }

    /// The chart as an SVG document of `width_px` x `height_px`.
    ///
    /// Panics below 320x200, where the layout does not fit.
    pub fn to_svg_sized(&self, width_px: u32, height_px: u32) -> String {
        let frame = Frame::new(self, width_px, height_px);
        svg::document(&frame.scene(self), frame.width, frame.height, &self.title)
    }

    /// Writes `<path>.svg` (the extension is appended, never replaced) and returns its path.
    pub fn write(&self, path_without_extension: &Path) -> std::io::Result<PathBuf> {
        let mut path = path_without_extension.as_os_str().to_owned();
        path.push(".svg");
        let path = PathBuf::from(path);
        std::fs::write(&path, self.to_svg())?;
        Ok(path)
    }

    /// The value drawn as the bar of `series` in `group`: `None` when not measured, not finite,
    /// or not positive on a log scale.
    fn value(&self, group: usize, series: usize) -> Option<f64> {
        let value = (*self.values.get(group)?.get(series)?)?;
        (value.is_finite() && (!self.log_scale || value > 0.0)).then_some(value)
    }

    /// Every value drawn as a bar.
    fn drawn_values(&self) -> impl Iterator<Item = f64> + '_ {
        let series_count = self.series.len();
        (0..self.groups.len())
            .flat_map(move |group| (0..series_count).filter_map(move |s| self.value(group, s)))
    }
}

/// `v` in at most three significant digits with a k (10^3), M (10^6) or G (10^9) suffix:
/// `1.2k`, `95k`, `1.1M`, `999`, `0.25`. Magnitudes under 0.001 or from 10^15 up are written
/// as `1.5e-4`, `2e15`.
pub fn format_compact(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    let sign = if v < 0.0 { "-" } else { "" };
    let magnitude = v.abs();
    if !(1e-3..1e15).contains(&magnitude) {
        let text = format!("{magnitude:.2e}");
        let (mantissa, exponent) = text.split_once('e').expect("{:e} writes an exponent");
        return format!("{sign}{}e{exponent}", trim_fraction(mantissa));
    }
    // Round to three significant digits before choosing the suffix, so 999_999 becomes 1M and
    // not 1000k.
    let digit_unit = 10f64.powi(magnitude.log10().floor() as i32 - 2);
    let rounded = (magnitude / digit_unit).round() * digit_unit;
    let (scaled, suffix) = match rounded {
        r if r >= 1e9 => (r / 1e9, "G"),
        r if r >= 1e6 => (r / 1e6, "M"),
        r if r >= 1e3 => (r / 1e3, "k"),
        r => (r, ""),
    };
    let decimals = (2 - scaled.log10().floor() as i32).max(0) as usize;
    format!("{sign}{}{suffix}", trim_fraction(&format!("{scaled:.decimals$}")))
}

/// `number` without trailing zeros after the decimal point, nor a bare point.
fn trim_fraction(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

// ---------------------------------------------------------------------------------------------
// The y axis
// ---------------------------------------------------------------------------------------------

/// Fewest and most ticks on a linear axis.
const TICKS_MIN: usize = 5;
const TICKS_MAX: usize = 8;
/// Slack when dividing by a step, so 100_000 / 20_000 counts as 5 and not 5.000001.
const STEP_EPSILON: f64 = 1e-9;

/// The y axis: its range and where its ticks are.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    log: bool,
    /// Bottom and top of the axis in axis units: the value, or its log10 on a log axis.
    low: f64,
    high: f64,
    /// Tick values (not logarithms), bottom to top.
    ticks: Vec<f64>,
}

impl Axis {
    fn for_chart(chart: &BarChart) -> Axis {
        let (min, max) = chart
            .drawn_values()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(min, max), v| (min.min(v), max.max(v)));
        match (chart.log_scale, min <= max) {
            (false, true) => Axis::linear(min, max),
            (false, false) => Axis::linear(0.0, 0.0),
            (true, true) => Axis::log(min, max),
            (true, false) => Axis::log(1.0, 10.0),
        }
    }

    /// A linear axis from 0 (or below, for negative values) with 5 to 8 ticks at multiples of a
    /// 1, 2 or 5 x 10^k step. It ends on ticks, except for the spans (14 to 15 x 10^k) that no
    /// such step divides into 4 to 7 intervals: the axis then ends at the data, the ticks inside.
    fn linear(min: f64, max: f64) -> Axis {
        let (mut low, mut high) = (min.min(0.0), max.max(0.0));
        if !(high - low).is_finite() || high - low <= 0.0 {
            (low, high) = (0.0, 1.0);
        }
        let span = high - low;
        let first_exponent = span.log10().floor() as i32 - 1;
        let steps = (0..12_i32).map(|i| {
            let mantissa = [1.0, 2.0, 5.0][(i % 3) as usize];
            mantissa * 10f64.powi(first_exponent + i / 3)
        });
        let ticks = |first: f64, count: usize, step: f64| -> Vec<f64> {
            (0..count).map(|i| (first + i as f64) * step).collect()
        };
        for step in steps.clone() {
            let first = (low / step + STEP_EPSILON).floor();
            let last = (high / step - STEP_EPSILON).ceil();
            let count = (last - first) as usize + 1;
            if count <= TICKS_MAX {
                if count < TICKS_MIN {
                    break;
                }
                return Axis {
                    log: false,
                    low: first * step,
                    high: last * step,
                    ticks: ticks(first, count, step),
                };
            }
        }
        for step in steps {
            let first = (low / step - STEP_EPSILON).ceil();
            let last = (high / step + STEP_EPSILON).floor();
            let count = (last - first) as usize + 1;
            if count <= TICKS_MAX {
                return Axis { log: false, low, high, ticks: ticks(first, count, step) };
            }
        }
        unreachable!("a step of 10^(k+2) leaves at most 2 ticks in a span under 10^(k+1)")
    }

    /// A log10 axis from the decade below `min` (so every bar has a height) to the decade at or
    /// above `max`, with a tick per decade, or per few decades when that would be more than 8.
    fn log(min: f64, max: f64) -> Axis {
        let low = (min.log10() - STEP_EPSILON).ceil() - 1.0;
        let top = (max.log10() - STEP_EPSILON).ceil().max(low + 1.0);
        let decades = (top - low) as usize;
        let decades_per_tick = decades.div_ceil(TICKS_MAX - 1);
        let tick_count = decades.div_ceil(decades_per_tick) + 1;
        let high = low + ((tick_count - 1) * decades_per_tick) as f64;
        let ticks = (0..tick_count)
            .map(|i| 10f64.powi(low as i32 + (i * decades_per_tick) as i32))
            .collect();
        Axis { log: true, low, high, ticks }
    }

    /// Where `value` sits between the bottom (0) and the top (1) of the axis.
    fn fraction(&self, value: f64) -> f64 {
        let units = if self.log { value.log10() } else { value };
        (units - self.low) / (self.high - self.low)
    }
}

// ---------------------------------------------------------------------------------------------
// Layout
// ---------------------------------------------------------------------------------------------

const MARGIN_PX: i32 = 16;
const TITLE_BASELINE_PX: i32 = 32;
const LEGEND_BASELINE_PX: i32 = 56;
const LEGEND_ROW_PX: i32 = 18;
const LEGEND_SWATCH_PX: i32 = 10;
const LEGEND_SWATCH_GAP_PX: i32 = 5;
const LEGEND_ENTRY_GAP_PX: i32 = 20;
/// Between the last legend baseline and the plot: room for the label of a full-height bar.
const PLOT_BELOW_LEGEND_PX: i32 = 28;
/// Under the plot: the group labels.
const PLOT_ABOVE_BOTTOM_PX: i32 = 40;
const GROUP_LABEL_BELOW_PLOT_PX: i32 = 18;
const TICK_PX: i32 = 4;
/// Between a tick mark and its label.
const TICK_LABEL_GAP_PX: i32 = 4;
/// Where the vertical y label's baseline runs, and the gap between it and the tick labels.
const Y_LABEL_X_PX: i32 = MARGIN_PX + ASCENT_PX;
const Y_LABEL_GAP_PX: i32 = 10;
/// Between a bar's end and its value label's baseline.
const VALUE_LABEL_GAP_PX: i32 = 3;
/// The share of a group's width its bars take.
const CLUSTER_FRACTION: f64 = 0.8;
/// The share of a bar's slot left empty beside it.
const BAR_GAP_FRACTION: f64 = 0.1;

/// The text metrics the layout assumes for labels: an 11-px sans-serif font, about 6 px a
/// character and 7 px above the baseline (titles are twice that).
const ADVANCE_PX: i32 = 6;
const ASCENT_PX: i32 = 7;
/// The SVG font size of each text kind.
pub(super) const LABEL_FONT_SIZE: u32 = 11;
pub(super) const TITLE_FONT_SIZE: u32 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rgb(pub(super) u8, pub(super) u8, pub(super) u8);

const BACKGROUND: Rgb = Rgb(0xff, 0xff, 0xff);
const INK: Rgb = Rgb(0x22, 0x22, 0x22);
const AXIS_COLOUR: Rgb = Rgb(0x55, 0x55, 0x55);
const GRID_COLOUR: Rgb = Rgb(0xdd, 0xdd, 0xdd);
const MISSING_COLOUR: Rgb = Rgb(0x99, 0x99, 0x99);
/// Series colours in order: Ferrite's rust orange first, then the other Dark2 colours and a blue.
const PALETTE: [Rgb; 8] = [
    Rgb(0xd9, 0x5f, 0x02),
    Rgb(0x1b, 0x9e, 0x77),
    Rgb(0x75, 0x70, 0xb3),
    Rgb(0xe7, 0x29, 0x8a),
    Rgb(0x66, 0xa6, 0x1e),
    Rgb(0xe6, 0xab, 0x02),
    Rgb(0xa6, 0x76, 0x1d),
    Rgb(0x1f, 0x78, 0xb4),
];

fn series_colour(series: usize) -> Rgb {
    PALETTE[series % PALETTE.len()]
}

/// Pixels `x..x + width` by `y..y + height`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rect {
    pub(super) x: i32,
    pub(super) y: i32,
    pub(super) width: i32,
    pub(super) height: i32,
}

impl Rect {
    fn centre_x(&self) -> i32 {
        self.x + self.width / 2
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TextSize {
    Label,
    Title,
}

impl TextSize {
    /// The size of this text relative to a label.
    fn scale(self) -> i32 {
        match self {
            TextSize::Label => 1,
            TextSize::Title => 2,
        }
    }
}

/// Which point of the text its position names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Anchor {
    Start,
    Middle,
    End,
}

/// Text whose baseline passes through (`x`, `y`), left to right, or bottom to top when
/// `vertical`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Text {
    pub(super) x: i32,
    pub(super) y: i32,
    pub(super) text: String,
    pub(super) size: TextSize,
    pub(super) anchor: Anchor,
    pub(super) vertical: bool,
    pub(super) fill: Rgb,
}

impl Text {
    fn label(x: i32, y: i32, text: impl Into<String>, anchor: Anchor) -> Text {
        Text { x, y, text: text.into(), size: TextSize::Label, anchor, vertical: false, fill: INK }
    }
}

/// The width `text` is given in the layout (`ADVANCE_PX` a character).
fn text_width_px(text: &str, size: TextSize) -> i32 {
    let chars = text.chars().count() as i32;
    (chars * ADVANCE_PX - 1).max(0) * size.scale()
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Shape {
    Rect {
        rect: Rect,
        fill: Rgb,
    },
    /// The pixels from (`x0`, `y0`) to (`x1`, `y1`), both included; horizontal or vertical.
    Line {
        x0: i32,
        y0: i32,
        x1: i32,
        y1: i32,
        stroke: Rgb,
    },
    Text(Text),
}

fn line(x0: i32, y0: i32, x1: i32, y1: i32, stroke: Rgb) -> Shape {
    assert!(
        x0 == x1 || y0 == y1,
        "only horizontal and vertical lines: ({x0}, {y0}) to ({x1}, {y1})"
    );
    Shape::Line { x0: x0.min(x1), y0: y0.min(y1), x1: x0.max(x1), y1: y0.max(y1), stroke }
}

/// Where everything goes: the plot area (pixels `left..right` by `top..bottom`), the axis, and
/// the legend rows.
#[derive(Debug, Clone, PartialEq)]
struct Frame {
    width: i32,
    height: i32,
    left: i32,
    right: i32,
    top: i32,
    bottom: i32,
    axis: Axis,
    groups: usize,
    series: usize,
    /// Series indexes on each legend row.
    legend_rows: Vec<Vec<usize>>,
}

impl Frame {
    fn new(chart: &BarChart, width_px: u32, height_px: u32) -> Frame {
        assert!(
            (MIN_WIDTH..=i32::MAX as u32 / 4).contains(&width_px)
                && (MIN_HEIGHT..=i32::MAX as u32 / 4).contains(&height_px),
            "a chart is at least {MIN_WIDTH}x{MIN_HEIGHT} pixels, not {width_px}x{height_px}"
        );
        let (width, height) = (width_px as i32, height_px as i32);
        let axis = Axis::for_chart(chart);
        let tick_labels_px = axis
            .ticks
            .iter()
            .map(|&tick| text_width_px(&format_compact(tick), TextSize::Label))
            .max()
            .unwrap_or(0);
        let legend_rows = legend_rows(&chart.series, width - 2 * MARGIN_PX);
        let top = match legend_rows.len() {
            0 => TITLE_BASELINE_PX + PLOT_BELOW_LEGEND_PX,
            rows => LEGEND_BASELINE_PX + (rows as i32 - 1) * LEGEND_ROW_PX + PLOT_BELOW_LEGEND_PX,
        };
        // So many legend rows would squash the plot: they overlap it instead.
        let top = top.min(height / 2);
        let left = Y_LABEL_X_PX + Y_LABEL_GAP_PX + tick_labels_px + TICK_LABEL_GAP_PX + TICK_PX;
        let frame = Frame {
            width,
            height,
            left,
            right: width - MARGIN_PX,
            top,
            bottom: height - PLOT_ABOVE_BOTTOM_PX,
            axis,
            groups: chart.groups.len(),
            series: chart.series.len(),
            legend_rows,
        };
        assert!(frame.bottom - frame.top >= 20 && frame.right - frame.left >= 20, "{frame:?}");
        frame
    }

    /// The pixel row of `value` (clamped to the plot).
    fn y_of(&self, value: f64) -> i32 {
        let fraction = self.axis.fraction(value);
        let fraction = if fraction.is_nan() { 0.0 } else { fraction.clamp(0.0, 1.0) };
        self.bottom - (fraction * f64::from(self.bottom - self.top)).round() as i32
    }

    /// The row bars start from: value 0 on a linear axis, the bottom on a log axis.
    fn base_y(&self) -> i32 {
        if self.axis.log {
            self.bottom
        } else {
            self.y_of(0.0)
        }
    }

    fn group_width(&self) -> f64 {
        f64::from(self.right - self.left) / self.groups.max(1) as f64
    }

    fn group_centre_x(&self, group: usize) -> i32 {
        (f64::from(self.left) + (group as f64 + 0.5) * self.group_width()).round() as i32
    }

    /// The columns of the slot of `series` in `group`: its bar plus the gap beside it.
    fn slot(&self, group: usize, series: usize) -> (i32, i32) {
        let cluster = self.group_width() * CLUSTER_FRACTION;
        let slot = cluster / self.series.max(1) as f64;
        let start = f64::from(self.left)
            + group as f64 * self.group_width()
            + (self.group_width() - cluster) / 2.0
            + series as f64 * slot;
        let (x0, x1) = (start.round() as i32, (start + slot).round() as i32);
        (x0, x1.max(x0 + 1))
    }

    /// The bar of `value` for `series` in `group`.
    fn bar(&self, group: usize, series: usize, value: f64) -> Rect {
        let (x0, x1) = self.slot(group, series);
        let gap = (f64::from(x1 - x0) * BAR_GAP_FRACTION).round() as i32;
        let width = (x1 - x0 - gap).max(1);
        let (base, end) = (self.base_y(), self.y_of(value));
        Rect { x: x0 + gap / 2, y: base.min(end), width, height: (base - end).abs() }
    }

    /// Everything drawn, back to front.
    fn scene(&self, chart: &BarChart) -> Vec<Shape> {
        let mut shapes = vec![Shape::Rect {
            rect: Rect { x: 0, y: 0, width: self.width, height: self.height },
            fill: BACKGROUND,
        }];
        self.grid(&mut shapes);
        self.bars(chart, &mut shapes);
        self.axes(chart, &mut shapes);
        self.legend(chart, &mut shapes);
        shapes.push(Shape::Text(Text {
            size: TextSize::Title,
            ..Text::label(self.width / 2, TITLE_BASELINE_PX, &chart.title, Anchor::Middle)
        }));
        shapes
    }

    fn grid(&self, shapes: &mut Vec<Shape>) {
        for &tick in &self.axis.ticks {
            let y = self.y_of(tick);
            if y != self.bottom {
                shapes.push(line(self.left, y, self.right - 1, y, GRID_COLOUR));
            }
        }
    }

    /// Bars with their value labels, and a mark where a value is missing.
    fn bars(&self, chart: &BarChart, shapes: &mut Vec<Shape>) {
        let labelled = self.value_labels_fit(chart);
        let mut labels = Vec::new();
        for group in 0..self.groups {
            for series in 0..self.series {
                let Some(value) = chart.value(group, series) else {
                    labels.push(self.missing_mark(group, series));
                    continue;
                };
                let rect = self.bar(group, series, value);
                if rect.height > 0 {
                    shapes.push(Shape::Rect { rect, fill: series_colour(series) });
                }
                // Above a bar, or below one that points down, if that is inside the plot.
                let y = if value < 0.0 {
                    rect.y + rect.height + VALUE_LABEL_GAP_PX + ASCENT_PX
                } else {
                    rect.y - VALUE_LABEL_GAP_PX
                };
                if labelled && (value >= 0.0 || y < self.bottom) {
                    let text = format_compact(value);
                    labels.push(Shape::Text(Text::label(rect.centre_x(), y, text, Anchor::Middle)));
                }
            }
        }
        shapes.append(&mut labels);
    }

    /// Whether every bar's value label fits the width of its slot. Bars are labelled all or
    /// none, so that a crowded chart does not show a few labels at random.
    fn value_labels_fit(&self, chart: &BarChart) -> bool {
        (0..self.groups).all(|group| {
            (0..self.series).all(|series| {
                let (x0, x1) = self.slot(group, series);
                chart.value(group, series).is_none_or(|value| {
                    text_width_px(&format_compact(value), TextSize::Label) <= x1 - x0
                })
            })
        })
    }

    /// "n/a" in grey at the foot of the slot, or a grey dash where that does not fit.
    fn missing_mark(&self, group: usize, series: usize) -> Shape {
        let (x0, x1) = self.slot(group, series);
        let mark = "n/a";
        if text_width_px(mark, TextSize::Label) <= x1 - x0 {
            let text = Text::label(
                (x0 + x1) / 2,
                self.base_y() - VALUE_LABEL_GAP_PX,
                mark,
                Anchor::Middle,
            );
            Shape::Text(Text { fill: MISSING_COLOUR, ..text })
        } else {
            line(x0, self.base_y() - 2, x1 - 1, self.base_y() - 2, MISSING_COLOUR)
        }
    }

    /// Axis lines, ticks with their labels, the y label, the group labels.
    fn axes(&self, chart: &BarChart, shapes: &mut Vec<Shape>) {
        shapes.push(line(self.left - 1, self.top, self.left - 1, self.bottom, AXIS_COLOUR));
        shapes.push(line(self.left - 1, self.bottom, self.right - 1, self.bottom, AXIS_COLOUR));
        if self.base_y() != self.bottom {
            shapes.push(line(self.left, self.base_y(), self.right - 1, self.base_y(), AXIS_COLOUR));
        }
        for &tick in &self.axis.ticks {
            let y = self.y_of(tick);
            shapes.push(line(self.left - 1 - TICK_PX, y, self.left - 2, y, AXIS_COLOUR));
            let x = self.left - 1 - TICK_PX - TICK_LABEL_GAP_PX;
            let baseline = y + ASCENT_PX / 2;
            shapes.push(Shape::Text(Text::label(x, baseline, format_compact(tick), Anchor::End)));
        }
        let middle_y = (self.top + self.bottom) / 2;
        shapes.push(Shape::Text(Text {
            vertical: true,
            ..Text::label(Y_LABEL_X_PX, middle_y, &chart.y_label, Anchor::Middle)
        }));
        let label_y = self.bottom + GROUP_LABEL_BELOW_PLOT_PX;
        for (group, name) in chart.groups.iter().enumerate() {
            shapes.push(Shape::Text(Text::label(
                self.group_centre_x(group),
                label_y,
                name,
                Anchor::Middle,
            )));
        }
        if chart.groups.is_empty() {
            let x = (self.left + self.right) / 2;
            shapes.push(Shape::Text(Text {
                fill: MISSING_COLOUR,
                ..Text::label(x, middle_y, "no data", Anchor::Middle)
            }));
        }
    }

    /// A coloured square and the name of each series, rows centred.
    fn legend(&self, chart: &BarChart, shapes: &mut Vec<Shape>) {
        for (row_index, row) in self.legend_rows.iter().enumerate() {
            let baseline = LEGEND_BASELINE_PX + row_index as i32 * LEGEND_ROW_PX;
            let row_width = legend_row_width(&chart.series, row);
            let mut x = (self.width - row_width) / 2;
            for &series in row {
                let swatch = Rect {
                    x,
                    y: baseline - LEGEND_SWATCH_PX + 1,
                    width: LEGEND_SWATCH_PX,
                    height: LEGEND_SWATCH_PX,
                };
                shapes.push(Shape::Rect { rect: swatch, fill: series_colour(series) });
                let name = &chart.series[series];
                let text_x = x + LEGEND_SWATCH_PX + LEGEND_SWATCH_GAP_PX;
                shapes.push(Shape::Text(Text::label(text_x, baseline, name, Anchor::Start)));
                x += legend_entry_width(name) + LEGEND_ENTRY_GAP_PX;
            }
        }
    }
}

fn legend_entry_width(name: &str) -> i32 {
    LEGEND_SWATCH_PX + LEGEND_SWATCH_GAP_PX + text_width_px(name, TextSize::Label)
}

fn legend_row_width(series: &[String], row: &[usize]) -> i32 {
    let entries: i32 = row.iter().map(|&s| legend_entry_width(&series[s])).sum();
    entries + LEGEND_ENTRY_GAP_PX * (row.len() as i32 - 1).max(0)
}

/// Series split greedily into rows no wider than `max_width_px` (a row holds at least one).
fn legend_rows(series: &[String], max_width_px: i32) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = Vec::new();
    for index in 0..series.len() {
        match rows.last_mut() {
            Some(row)
                if legend_row_width(series, row)
                    + LEGEND_ENTRY_GAP_PX
                    + legend_entry_width(&series[index])
                    <= max_width_px =>
            {
                row.push(index)
            }
            _ => rows.push(vec![index]),
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::svg::{escape_xml, hex};

    fn example() -> BarChart {
        BarChart {
            title: "Throughput, 4 threads".to_string(),
            y_label: "operations/s".to_string(),
            groups: vec!["lookup".into(), "ycsb-a".into(), "ycsb-c".into()],
            series: vec!["ferrite".into(), "rocksdb".into(), "wiredtiger".into(), "lmdb".into()],
            values: vec![
                vec![Some(1_250_000.0), Some(640_000.0), Some(410_000.0), Some(1_480_000.0)],
                vec![Some(310_000.0), Some(280_000.0), Some(95_000.0), None],
                vec![Some(1_100_000.0), Some(590_000.0), Some(380_000.0), Some(1_350_000.0)],
            ],
            log_scale: false,
        }
    }

    #[test]
    fn svg_holds_every_label_and_is_balanced() {
        let chart = example();
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg ") && svg.contains(r#"viewBox="0 0 960 540""#));
        assert!(svg.contains(r#"font-family="sans-serif""#));
        for name in chart.groups.iter().chain(&chart.series).chain([&chart.title, &chart.y_label]) {
            assert!(svg.contains(&format!(">{}</text>", escape_xml(name))), "{name}");
        }
        for row in &chart.values {
            for value in row.iter().flatten() {
                assert!(svg.contains(&format!(">{}</text>", format_compact(*value))), "{value}");
            }
        }
        assert!(svg.contains(">n/a</text>"));
        assert_eq!(svg.matches("<svg").count(), 1);
        assert_eq!(svg.matches("</svg>").count(), 1);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        assert_eq!(svg.matches("<title>").count(), svg.matches("</title>").count());
        // Every other element closes itself.
        for element in svg.split('<').skip(1) {
            let name = element.split([' ', '>']).next().unwrap();
            match name {
                "svg" | "/svg" | "text" | "/text" | "title" | "/title" => {}
                "rect" | "line" => assert!(element.trim_end().ends_with("/>"), "{element}"),
                _ => panic!("unexpected element {element}"),
            }
        }
        // Nothing but escaped text between the tags.
        for between in svg.split('>').map(|s| s.split('<').next().unwrap()) {
            assert!(!between.contains('<') && !between.contains('"'), "{between}");
        }
    }

    #[test]
    fn svg_draws_bars_where_the_layout_puts_them() {
        let chart = example();
        let frame = Frame::new(&chart, DEFAULT_WIDTH, DEFAULT_HEIGHT);
        let bar = frame.bar(1, 0, 310_000.0);
        let fill = hex(series_colour(0));
        let svg = chart.to_svg();
        let rect = format!(
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}"/>"#,
            bar.x, bar.y, bar.width, bar.height
        );
        assert!(svg.contains(&rect), "{rect}");
    }

    #[test]
    fn linear_ticks_are_1_2_5_steps() {
        let axis = Axis::linear(0.0, 95_000.0);
        let expected: Vec<f64> = (0..=5).map(|i| f64::from(i) * 20_000.0).collect();
        assert_eq!(axis.ticks, expected);
        assert_eq!((axis.low, axis.high), (0.0, 100_000.0));
        let labels: Vec<String> = axis.ticks.iter().map(|&t| format_compact(t)).collect();
        assert_eq!(labels, ["0", "20k", "40k", "60k", "80k", "100k"]);

        assert_eq!(Axis::linear(0.0, 1.0).ticks.len(), 6);
        assert_eq!(Axis::linear(0.0, 0.0), Axis::linear(0.0, 1.0));

        // The rule, over many ranges: 5 to 8 ticks, a 1-2-5 step, covering the data.
        let mut max = 0.013;
        while max < 1e12 {
            for min in [0.0, -max / 3.0] {
                let axis = Axis::linear(min, max);
                let ticks = &axis.ticks;
                assert!((TICKS_MIN..=TICKS_MAX).contains(&ticks.len()), "{min} {max}: {ticks:?}");
                let step = ticks[1] - ticks[0];
                let mantissa = step / 10f64.powf(step.log10().floor());
                assert!([1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6), "{step}");
                for pair in ticks.windows(2) {
                    assert!(((pair[1] - pair[0]) - step).abs() <= step * 1e-9, "{ticks:?}");
                }
                assert!(axis.low <= min && axis.high >= max * (1.0 - 1e-12), "{axis:?}");
                assert!(ticks.contains(&0.0), "{ticks:?}");
                assert!(
                    ticks[0] >= axis.low && *ticks.last().unwrap() <= axis.high * (1.0 + 1e-12)
                );
                // No more than a step of empty axis above the data.
                assert!(axis.high - max < step, "{axis:?}");
            }
            max *= 1.0137;
        }
    }

    #[test]
    fn log_ticks_are_decades() {
        let axis = Axis::log(3.0, 2_000_000.0);
        let labels: Vec<String> = axis.ticks.iter().map(|&t| format_compact(t)).collect();
        assert_eq!(labels, ["1", "10", "100", "1k", "10k", "100k", "1M", "10M"]);
        assert_eq!((axis.low, axis.high), (0.0, 7.0));
        // A value on a decade still gets a bar: the axis starts a decade lower.
        let axis = Axis::log(1000.0, 1000.0);
        assert_eq!(axis.ticks, [100.0, 1000.0]);
        // Many decades: a tick every few, still at most 8.
        let axis = Axis::log(1e-3, 1e12);
        assert!(axis.ticks.len() <= TICKS_MAX, "{:?}", axis.ticks);
        assert_eq!(axis.ticks[0], 1e-4);
        assert!(*axis.ticks.last().unwrap() >= 1e12);

        let chart = BarChart { log_scale: true, ..example() };
        let svg = chart.to_svg();
        for label in ["10k", "100k", "1M", "10M"] {
            assert!(svg.contains(&format!(">{label}</text>")), "{label}");
        }
    }

    #[test]
    fn crowded_charts_label_no_bar() {
        let chart = BarChart {
            groups: (0..12).map(|g| format!("w{g}")).collect(),
            series: (0..8).map(|s| format!("e{s}")).collect(),
            values: vec![vec![Some(12_345.0); 8]; 12],
            ..BarChart::default()
        };
        assert!(!chart.to_svg().contains(">12.3k</text>"));
        let roomy =
            BarChart { groups: vec!["w".into()], values: vec![vec![Some(12_345.0); 8]], ..chart };
        assert_eq!(roomy.to_svg().matches(">12.3k</text>").count(), 8);
    }

    #[test]
    fn missing_values_draw_no_bar() {
        let mut chart = example();
        let frame = Frame::new(&chart, DEFAULT_WIDTH, DEFAULT_HEIGHT);
        let bars = |chart: &BarChart, series: usize| -> usize {
            let scene = Frame::new(chart, DEFAULT_WIDTH, DEFAULT_HEIGHT).scene(chart);
            let fill = series_colour(series);
            // The legend swatch is the one above the plot.
            let in_plot = |rect: &Rect| rect.y >= frame.top;
            scene
                .iter()
                .filter(
                    |s| matches!(s, Shape::Rect { rect, fill: f } if *f == fill && in_plot(rect)),
                )
                .count()
        };
        assert_eq!(bars(&chart, 3), 2, "lmdb has no ycsb-a value");
        assert_eq!(bars(&chart, 0), 3);
        assert_eq!(chart.to_svg().matches(">n/a</text>").count(), 1);

        // Log scale: values <= 0 are missing too.
        chart.log_scale = true;
        chart.values[0][3] = Some(0.0);
        chart.values[2][3] = Some(-5.0);
        assert_eq!(bars(&chart, 3), 0);
        assert_eq!(chart.to_svg().matches(">n/a</text>").count(), 3);

        // Short rows, NaN and infinity.
        chart.log_scale = false;
        chart.values = vec![vec![Some(f64::NAN)], vec![Some(f64::INFINITY), Some(-3.0)]];
        assert_eq!(bars(&chart, 0), 0);
        assert_eq!(bars(&chart, 1), 1);
    }

    #[test]
    fn degenerate_charts_do_not_panic() {
        let mut charts = vec![BarChart::default()];
        let all_missing = BarChart { values: vec![vec![None; 4]; 3], ..example() };
        charts.push(all_missing.clone());
        charts.push(BarChart { log_scale: true, ..all_missing });
        charts.push(BarChart { groups: Vec::new(), values: Vec::new(), ..example() });
        charts.push(BarChart { series: Vec::new(), ..example() });
        charts.push(BarChart { values: vec![vec![Some(0.0); 4]; 3], ..example() });
        charts.push(BarChart {
            values: vec![vec![Some(-2.5), Some(7.0), None, Some(1e-5)]; 3],
            ..example()
        });
        charts
            .push(BarChart { values: vec![vec![Some(f64::MAX), Some(-f64::MAX)]; 3], ..example() });
        let many = BarChart {
            groups: (0..40).map(|g| format!("workload-{g}")).collect(),
            series: (0..12).map(|s| format!("engine number {s}")).collect(),
            values: (0..40)
                .map(|g| (0..12).map(|s| Some(f64::from(g * 12 + s))).collect())
                .collect(),
            ..example()
        };
        charts.push(many);
        for chart in charts {
            let svg = chart.to_svg();
            assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
            let background = format!(
                r#"<rect x="0" y="0" width="{DEFAULT_WIDTH}" height="{DEFAULT_HEIGHT}" fill="{}"/>"#,
                hex(BACKGROUND)
            );
            assert!(svg.contains(&background), "{svg}");
        }
    }

    #[test]
    fn write_appends_the_extension() {
        let directory = tempfile::TempDir::new().unwrap();
        let chart = example();
        let path = chart.write(&directory.path().join("lookup.v2")).unwrap();
        assert_eq!(path, directory.path().join("lookup.v2.svg"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), chart.to_svg());
    }

    #[test]
    fn compact_numbers() {
        let cases = [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (7.0, "7"),
            (12.5, "12.5"),
            (999.0, "999"),
            (999.6, "1k"),
            (1000.0, "1k"),
            (1200.0, "1.2k"),
            (1234.0, "1.23k"),
            (95_000.0, "95k"),
            (123_456.0, "123k"),
            (999_999.0, "1M"),
            (1_100_000.0, "1.1M"),
            (20_000_000.0, "20M"),
            (2.5e9, "2.5G"),
            (3.0e12, "3000G"),
            (999.4e12, "999000G"),
            (2.0e15, "2e15"),
            (-1.25e20, "-1.25e20"),
            (0.5, "0.5"),
            (0.25, "0.25"),
            (0.0123, "0.0123"),
            (0.001, "0.001"),
            (0.00012, "1.2e-4"),
            (-1500.0, "-1.5k"),
            (0.1 + 0.2, "0.3"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (value, expected) in cases {
            assert_eq!(format_compact(value), expected, "{value}");
        }
    }
}
