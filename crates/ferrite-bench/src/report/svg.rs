//! A chart's shapes as an SVG document: rectangles, 1-pixel lines and text, in the order they
//! are drawn.

use std::fmt::Write as _;

use super::chart::{Anchor, Rect, Rgb, Shape, Text, TextSize, LABEL_FONT_SIZE, TITLE_FONT_SIZE};

/// The SVG document of `shapes`, `width` x `height` pixels, titled `title`.
pub(super) fn document(shapes: &[Shape], width: i32, height: i32, title: &str) -> String {
    let mut svg = String::with_capacity(256 + shapes.len() * 96);
    // Writing into a String cannot fail, here and below.
    let _ = write!(svg, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}""#);
    let _ = writeln!(
        svg,
        r#" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif">"#
    );
    let _ = writeln!(svg, "<title>{}</title>", escape_xml(title));
    for shape in shapes {
        match shape {
            Shape::Rect { rect, fill } => {
                let Rect { x, y, width, height } = rect;
                let fill = hex(*fill);
                let _ = writeln!(
                    svg,
                    r#"<rect x="{x}" y="{y}" width="{width}" height="{height}" fill="{fill}"/>"#
                );
            }
            // Through the middle of the pixels, so a 1-px line covers exactly them.
            Shape::Line { x0, y0, x1, y1, stroke } => {
                let (x0, y0, x1, y1) = if y0 == y1 {
                    (
                        f64::from(*x0),
                        f64::from(*y0) + 0.5,
                        f64::from(*x1) + 1.0,
                        f64::from(*y1) + 0.5,
                    )
                } else {
                    (
                        f64::from(*x0) + 0.5,
                        f64::from(*y0),
                        f64::from(*x1) + 0.5,
                        f64::from(*y1) + 1.0,
                    )
                };
                let stroke = hex(*stroke);
                let _ = writeln!(
                    svg,
                    r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="1"/>"#,
                    x0, y0, x1, y1, stroke
                );
            }
            Shape::Text(text) => svg_text(&mut svg, text),
        }
    }
    svg.push_str("</svg>\n");
    svg
}

fn svg_text(svg: &mut String, text: &Text) {
    let Text { x, y, size, anchor, vertical, fill, .. } = text;
    let (font_size, weight) = match size {
        TextSize::Label => (LABEL_FONT_SIZE, ""),
        TextSize::Title => (TITLE_FONT_SIZE, r#" font-weight="bold""#),
    };
    let anchor = match anchor {
        Anchor::Start => "start",
        Anchor::Middle => "middle",
        Anchor::End => "end",
    };
    let rotate =
        if *vertical { format!(r#" transform="rotate(-90 {x} {y})""#) } else { String::new() };
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="{}"{} text-anchor="{}" fill="{}"{}>{}</text>"#,
        x,
        y,
        font_size,
        weight,
        anchor,
        hex(*fill),
        rotate,
        escape_xml(&text.text)
    );
}

pub(super) fn hex(colour: Rgb) -> String {
    format!("#{:02x}{:02x}{:02x}", colour.0, colour.1, colour.2)
}

/// `text` safe inside an XML element or attribute: markup characters as entities, and the
/// control characters XML 1.0 forbids dropped.
pub(super) fn escape_xml(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => escaped.push(c),
            c if c.is_control() => {}
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::chart::BarChart;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape_xml(r#"a<b>&"c"'d'"#), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
        assert_eq!(escape_xml("µs\u{1}\tok"), "µs\tok");
        let chart = BarChart {
            title: "<script>&".into(),
            series: vec!["R&D \"fast\"".into()],
            groups: vec!["a<b".into()],
            values: vec![vec![Some(1.0)]],
            ..BarChart::default()
        };
        let svg = chart.to_svg();
        assert!(!svg.contains("<script>") && svg.contains("&lt;script&gt;&amp;"));
        assert!(svg.contains(">R&amp;D &quot;fast&quot;</text>") && svg.contains(">a&lt;b</text>"));
    }

    #[test]
    fn colours_are_hex_triplets() {
        assert_eq!(hex(Rgb(0xd9, 0x5f, 0x02)), "#d95f02");
        assert_eq!(hex(Rgb(0, 0, 0)), "#000000");
    }
}
