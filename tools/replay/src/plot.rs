//! `--plot`: a replay's [`Timeline`] as a picture, one panel per bucket, time across.
//!
//! Each panel shows the bucket's use against its limit and the lower lines Normal and
//! Bulk may use up to (their headroom), each refusal as a mark by reason, holds
//! (orange) and halts (red) as bands, and the venue's throttles and bans as vertical
//! lines. A `--compare` timeline is drawn over it in purple, dashed; `--by-label`
//! stacks the use by the label of the charges that spent it. SVG through plotters'
//! SVG backend (text as `<text>`, no fonts read); HTML is that SVG inlined, with
//! nothing fetched from a network.

use std::fmt::Display;

use ergon_core::{Kind, Why};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::timeline::{Refusal, Timeline, Track};

/// Runs `$body` with `$f` making a refusal's mark at a point (data or pixel
/// coordinates): full ×, held ▲, halted ●, too big □. One body per shape, because
/// plotters' boxed elements need a backend that lives forever, which a string-backed
/// SVG is not.
macro_rules! marks {
    ($why:expr, $color:expr, $f:ident => $body:expr) => {{
        let color: RGBColor = $color;
        let style = color.stroke_width(2);
        match $why {
            Why::Full => {
                let $f = |p| EmptyElement::at(p) + Cross::new((0, 0), 4, style);
                $body
            }
            Why::Held => {
                let $f = |p| EmptyElement::at(p) + TriangleMarker::new((0, 0), 5, color.filled());
                $body
            }
            Why::Halted | Why::Closed => {
                let $f = |p| EmptyElement::at(p) + Circle::new((0, 0), 4, color.filled());
                $body
            }
            // A replay charges only its own budget's ids: Foreign never comes.
            Why::TooBig | Why::Foreign | Why::Receipts => {
                let $f = |p| EmptyElement::at(p) + Rectangle::new([(-4, -4), (4, 4)], style);
                $body
            }
        }
    }};
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What to draw besides the timeline itself.
#[derive(Debug, Default)]
pub struct Labels {
    /// The title line (e.g. the trace's file name).
    pub title: String,
    /// What the main timeline replayed against (e.g. "the trace's declarations").
    pub primary: String,
    /// What the compared timeline replayed against, if any.
    pub compare: Option<String>,
    /// Stack the use by label.
    pub by_label: bool,
}

const WIDTH: u32 = 1200;
const LEGEND: u32 = 230;
const PANEL: u32 = 270;
const LOW_PANEL: u32 = 150;
const GATE_PANEL: u32 = 120;
const TITLE: u32 = 50;
/// Beyond this many changes a use line is cut into bins that keep each bin's peak.
const MAX_STEPS: usize = 3000;
/// At most this many refusal marks of one reason per panel.
const MAX_MARKS: f64 = 1500.0;

const USE: RGBColor = RGBColor(31, 119, 180);
const COMPARE: RGBColor = RGBColor(148, 52, 190);
const HOLD: RGBColor = RGBColor(255, 150, 30);
const HALT: RGBColor = RGBColor(214, 39, 40);
const GRAY: RGBColor = RGBColor(110, 110, 110);
const TOO_BIG: RGBColor = RGBColor(140, 86, 75);
/// The opacity of hold and halt bands.
const BAND: f64 = 0.3;
/// Opaque light fills for the label stack, unlabelled (index 0) gray.
const LABELS: [RGBColor; 10] = [
    RGBColor(205, 205, 205),
    RGBColor(174, 199, 232),
    RGBColor(152, 223, 138),
    RGBColor(197, 176, 213),
    RGBColor(247, 182, 210),
    RGBColor(158, 218, 229),
    RGBColor(219, 219, 141),
    RGBColor(196, 156, 148),
    RGBColor(255, 200, 140),
    RGBColor(255, 170, 168),
];

/// Draws `main` (and `compare`, the same trace against other declarations) as an SVG
/// document.
pub fn svg(main: &Timeline, compare: Option<&Timeline>, labels: &Labels) -> Result<String, String> {
    // A bucket used far below its limit gets a low panel: a flat line says enough.
    let heights: Vec<u32> = main
        .buckets
        .iter()
        .map(|b| match b.kind {
            Kind::Gate => GATE_PANEL,
            _ if peak(b).saturating_mul(20) < b.allowances[0] => LOW_PANEL,
            _ => PANEL,
        })
        .collect();
    let height = TITLE + heights.iter().sum::<u32>();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (title, mut rest) = root.split_vertically(TITLE);
        draw_title(&title, labels)?;
        let (t0, t1) = main.span.unwrap_or((0, 1));
        let x = (0.0, secs(t1, t0).max(1e-3));
        for (i, track) in main.buckets.iter().enumerate() {
            let (area, below) = rest.split_vertically(heights[i]);
            rest = below;
            let other = compare.and_then(|c| c.buckets.iter().find(|b| b.name == track.name));
            let panel = Panel {
                track,
                other,
                t0,
                x,
                labels: &main.labels,
                by_label: labels.by_label,
            };
            panel.draw(&area)?;
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The SVG in a self-contained HTML page.
pub fn html(svg: &str, title: &str) -> String {
    let title = title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\n\
         <body style=\"margin:0\">\n{svg}\n</body></html>\n"
    )
}

fn err(e: impl Display) -> String {
    format!("cannot draw the picture: {e}")
}

fn secs(t: i64, t0: i64) -> f64 {
    (t - t0) as f64 / 1e9
}

fn draw_title(area: &Area<'_>, labels: &Labels) -> Result<(), String> {
    let big = ("sans-serif", 20).into_font();
    let small = ("sans-serif", 14).into_font();
    area.draw(&Text::new(labels.title.clone(), (10, 6), big))
        .map_err(err)?;
    let mut line = format!("blue: use against {}", labels.primary);
    if let Some(c) = &labels.compare {
        line.push_str(&format!(";  purple, dashed: use against {c}"));
    }
    area.draw(&Text::new(line, (10, 30), small)).map_err(err)
}

struct Panel<'a> {
    track: &'a Track,
    other: Option<&'a Track>,
    t0: i64,
    x: (f64, f64),
    labels: &'a [String],
    by_label: bool,
}

/// One entry of a panel's legend.
enum Key {
    Line(RGBColor, bool),
    Band(RGBColor),
    Area(RGBColor),
    Mark(Why, RGBColor),
}

impl Panel<'_> {
    fn draw(&self, area: &Area<'_>) -> Result<(), String> {
        let (plot_area, legend_area) = area.split_horizontally(WIDTH - LEGEND);
        let gate = matches!(self.track.kind, Kind::Gate);
        let y_max = if gate { 1.0 } else { self.y_max() };
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(self.caption(), ("sans-serif", 15))
            .margin(6)
            .x_label_area_size(28)
            .y_label_area_size(if gate { 10 } else { 60 })
            .build_cartesian_2d(self.x.0..self.x.1, 0.0..y_max)
            .map_err(err)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("seconds since the first event")
            .y_desc("units")
            .light_line_style(WHITE)
            .label_style(("sans-serif", 12))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .x_label_formatter(&|x| format!("{x}"));
        if gate {
            mesh.disable_y_axis().disable_y_mesh().y_desc("");
        } else if plot_area.dim_in_pixel().1 < PANEL {
            mesh.y_labels(3);
        }
        mesh.draw().map_err(err)?;
        let mut keys = Vec::new();
        if self.by_label && !gate {
            self.draw_labels(&mut chart, &mut keys)?;
        }
        self.draw_bands(&mut chart, y_max, &mut keys)?;
        if !gate {
            self.draw_limits(&mut chart, self.track, false, &mut keys)?;
            if let Some(other) = self.other {
                self.draw_limits(&mut chart, other, true, &mut keys)?;
            }
            self.draw_use(&mut chart, self.track, false)?;
            keys.push(("use".to_owned(), Key::Line(USE, false)));
            if let Some(other) = self.other {
                self.draw_use(&mut chart, other, true)?;
                keys.push(("use (compare)".to_owned(), Key::Line(COMPARE, true)));
            }
        }
        self.draw_venue(&mut chart, y_max, &mut keys)?;
        self.draw_refusals(&mut chart, self.track, USE, gate, &mut keys)?;
        if let Some(other) = self.other {
            self.draw_refusals(&mut chart, other, COMPARE, gate, &mut keys)?;
        }
        draw_legend(&legend_area, &keys)
    }

    fn caption(&self) -> String {
        let t = self.track;
        let refused = t.refusals.len();
        let what = match t.kind {
            Kind::Sliding { window_ns, .. } => {
                format!("sliding, {} per {}", t.allowances[0], span(window_ns))
            }
            Kind::Fixed { window_ns, .. } => {
                format!("fixed, {} per {}", t.allowances[0], span(window_ns))
            }
            Kind::Token { interval_ns, burst } => {
                format!("token, 1 per {}, burst {burst}", span(interval_ns))
            }
            Kind::InFlight { limit } => format!("in flight, at most {limit}"),
            Kind::Gate => "gate: holds and halts only".to_owned(),
        };
        if matches!(t.kind, Kind::Gate) {
            return format!("{}  ({what}; {refused} refused)", t.name);
        }
        let mut caption = format!("{}  ({what}; peak {}, {refused} refused", t.name, peak(t));
        if let Some(o) = self.other {
            caption.push_str(&format!(
                "; compare: peak {}, {} refused",
                peak(o),
                o.refusals.len()
            ));
        }
        caption.push(')');
        caption
    }

    fn y_max(&self) -> f64 {
        let top = |t: &Track| {
            let stacked = t
                .by_label
                .iter()
                .map(|(_, s)| s.iter().sum::<u64>())
                .max()
                .unwrap_or(0);
            peak(t).max(stacked).max(t.allowances[0])
        };
        let top = top(self.track).max(self.other.map_or(0, top));
        (top as f64 * 1.08).max(1.0)
    }

    fn draw_bands(
        &self,
        chart: &mut Chart<'_, '_>,
        y_max: f64,
        keys: &mut Vec<(String, Key)>,
    ) -> Result<(), String> {
        let t = self.track;
        let end = self.x.1;
        let band = |from: f64, to: f64, color: RGBColor| {
            Rectangle::new(
                [(from, 0.0), (to.min(end), y_max)],
                color.mix(BAND).filled(),
            )
        };
        if !t.holds.is_empty() {
            chart
                .draw_series(
                    t.holds
                        .iter()
                        .map(|&(a, b)| band(secs(a, self.t0), secs(b, self.t0), HOLD)),
                )
                .map_err(err)?;
            keys.push(("held (throttle)".to_owned(), Key::Band(HOLD)));
        }
        if !t.halts.is_empty() {
            chart
                .draw_series(t.halts.iter().map(|&(a, b)| {
                    band(secs(a, self.t0), b.map_or(end, |b| secs(b, self.t0)), HALT)
                }))
                .map_err(err)?;
            keys.push(("halted (ban)".to_owned(), Key::Band(HALT)));
        }
        Ok(())
    }

    fn draw_limits(
        &self,
        chart: &mut Chart<'_, '_>,
        track: &Track,
        compare: bool,
        keys: &mut Vec<(String, Key)>,
    ) -> Result<(), String> {
        let [limit, normal, bulk] = track.allowances;
        let (x0, x1) = self.x;
        let lines = [
            (limit, format!("limit (urgent) {limit}"), 2),
            (normal, format!("normal up to {normal}"), 1),
            (bulk, format!("bulk up to {bulk}"), 1),
        ];
        for (i, (units, name, width)) in lines.into_iter().enumerate() {
            if i > 0 && units == limit {
                continue;
            }
            let color = match (compare, i) {
                (true, _) => COMPARE,
                (false, 0) => BLACK,
                _ => GRAY,
            };
            let style = color.stroke_width(width);
            let y = units as f64;
            if compare || i > 0 {
                chart
                    .draw_series(DashedLineSeries::new([(x0, y), (x1, y)], 6, 4, style))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(LineSeries::new([(x0, y), (x1, y)], style))
                    .map_err(err)?;
            }
            if !compare {
                keys.push((name, Key::Line(color, i > 0)));
            }
        }
        if compare {
            // One legend line for the three: a panel has little room.
            let mut all = vec![limit.to_string()];
            all.extend(
                [normal, bulk]
                    .iter()
                    .filter(|&&a| a != limit)
                    .map(u64::to_string),
            );
            keys.push((
                format!("compare: {}", all.join(" / ")),
                Key::Line(COMPARE, true),
            ));
        }
        Ok(())
    }

    fn draw_use(
        &self,
        chart: &mut Chart<'_, '_>,
        track: &Track,
        compare: bool,
    ) -> Result<(), String> {
        let points = steps(&track.used, |&u| u as f64, self.t0, self.x.1);
        if compare {
            chart
                .draw_series(DashedLineSeries::new(points, 5, 3, COMPARE.stroke_width(2)))
                .map_err(err)?;
        } else {
            chart
                .draw_series(LineSeries::new(points, USE.stroke_width(2)))
                .map_err(err)?;
        }
        Ok(())
    }

    /// Stacked areas, the first label at the bottom: each area is drawn from zero to
    /// the sum of its label and those below it, tallest first.
    fn draw_labels(
        &self,
        chart: &mut Chart<'_, '_>,
        keys: &mut Vec<(String, Key)>,
    ) -> Result<(), String> {
        let samples = &self.track.by_label;
        let used: Vec<usize> = (0..self.labels.len())
            .filter(|&l| {
                samples
                    .iter()
                    .any(|(_, s)| s.get(l).is_some_and(|&u| u > 0))
            })
            .collect();
        for (rank, &label) in used.iter().enumerate().rev() {
            let below = &used[..=rank];
            let points = steps(
                samples,
                |s: &Vec<u64>| {
                    below
                        .iter()
                        .map(|&l| s.get(l).copied().unwrap_or(0))
                        .sum::<u64>() as f64
                },
                self.t0,
                self.x.1,
            );
            let color = LABELS[label % LABELS.len()];
            chart
                .draw_series(AreaSeries::new(points, 0.0, color.filled()))
                .map_err(err)?;
            let name = match self.labels[label].as_str() {
                "" => "(no label)".to_owned(),
                l => l.to_owned(),
            };
            keys.push((name, Key::Area(color)));
        }
        Ok(())
    }

    fn draw_venue(
        &self,
        chart: &mut Chart<'_, '_>,
        y_max: f64,
        keys: &mut Vec<(String, Key)>,
    ) -> Result<(), String> {
        let t = self.track;
        for (times, color, text, key) in [
            (&t.throttles, HOLD, "429", "throttle (venue)"),
            (&t.bans, HALT, "ban", "ban (venue)"),
        ] {
            if times.is_empty() {
                continue;
            }
            for &at in times {
                let x = secs(at, self.t0);
                chart
                    .draw_series(LineSeries::new(
                        [(x, 0.0), (x, y_max)],
                        color.stroke_width(2),
                    ))
                    .map_err(err)?;
                chart
                    .draw_series([Text::new(
                        text.to_owned(),
                        (x, y_max),
                        ("sans-serif", 12).into_font().color(&color),
                    )])
                    .map_err(err)?;
            }
            keys.push((key.to_owned(), Key::Line(color, false)));
        }
        Ok(())
    }

    fn draw_refusals(
        &self,
        chart: &mut Chart<'_, '_>,
        track: &Track,
        color: RGBColor,
        gate: bool,
        keys: &mut Vec<(String, Key)>,
    ) -> Result<(), String> {
        let compare = color == COMPARE;
        for why in [Why::Full, Why::Held, Why::Halted, Why::TooBig] {
            let at = |r: &Refusal| (secs(r.t, self.t0), if gate { 0.5 } else { r.used as f64 });
            let of = thin(
                track.refusals.iter().filter(|r| r.why == why).map(at),
                self.x.1,
            );
            if of.is_empty() {
                continue;
            }
            let c = if compare { COMPARE } else { mark_color(why) };
            marks!(why, c, f => chart
                .draw_series(of.iter().map(|&p| f(p)))
                .map(|_| ())
                .map_err(err))?;
            let suffix = if compare { " (compare)" } else { "" };
            keys.push((
                format!("refused: {}{suffix}", why_name(why)),
                Key::Mark(why, c),
            ));
        }
        Ok(())
    }
}

/// Marks in time order, at most one per [`MAX_MARKS`]th of the time axis (the highest):
/// a refusal every millisecond for an hour draws as a line of marks, not a million.
fn thin(marks: impl Iterator<Item = (f64, f64)>, end: f64) -> Vec<(f64, f64)> {
    let width = end / MAX_MARKS;
    let mut kept: Vec<(f64, f64, f64)> = Vec::new();
    for (x, y) in marks {
        let bin = (x / width).floor();
        match kept.last_mut() {
            Some((b, _, top)) if *b == bin => {
                if y > *top {
                    *top = y;
                }
            }
            _ => kept.push((bin, x, y)),
        }
    }
    kept.into_iter().map(|(_, x, y)| (x, y)).collect()
}

/// The most the bucket counted at once.
fn peak(t: &Track) -> u64 {
    t.used.iter().map(|&(_, u)| u).max().unwrap_or(0)
}

fn mark_color(why: Why) -> RGBColor {
    match why {
        Why::Full => HALT,
        Why::Held => HOLD,
        Why::Halted | Why::Closed => BLACK,
        Why::TooBig | Why::Foreign | Why::Receipts => TOO_BIG,
    }
}

fn why_name(why: Why) -> &'static str {
    match why {
        Why::Full => "full",
        Why::Held => "held",
        Why::Halted => "halted",
        Why::TooBig => "too big",
        Why::Foreign => "foreign",
        Why::Receipts => "receipts",
        Why::Closed => "closed",
    }
}

fn draw_legend(area: &Area<'_>, keys: &[(String, Key)]) -> Result<(), String> {
    let font = ("sans-serif", 13).into_font();
    for (i, (name, key)) in keys.iter().enumerate() {
        let y = 28 + 15 * i as i32;
        let x = 8;
        match *key {
            Key::Line(color, dashed) => {
                let style = color.stroke_width(2);
                if dashed {
                    for dx in [0, 9, 18] {
                        area.draw(&PathElement::new([(x + dx, y), (x + dx + 5, y)], style))
                            .map_err(err)?;
                    }
                } else {
                    area.draw(&PathElement::new([(x, y), (x + 24, y)], style))
                        .map_err(err)?;
                }
            }
            Key::Band(color) | Key::Area(color) => {
                let fill = match key {
                    Key::Band(_) => color.mix(BAND).filled(),
                    _ => color.filled(),
                };
                area.draw(&Rectangle::new([(x, y - 6), (x + 24, y + 6)], fill))
                    .map_err(err)?;
            }
            Key::Mark(why, color) => {
                marks!(why, color, f => area.draw(&f((x + 12, y))).map_err(err))?;
            }
        }
        area.draw(&Text::new(name.clone(), (x + 32, y - 7), font.clone()))
            .map_err(err)?;
    }
    Ok(())
}

/// `(t, value)` changes as a step line from the first event to `end` seconds; past
/// [`MAX_STEPS`] changes, cut into bins keeping each bin's peak.
fn steps<T>(samples: &[(i64, T)], value: impl Fn(&T) -> f64, t0: i64, end: f64) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = samples
        .iter()
        .map(|(t, v)| (secs(*t, t0), value(v)))
        .collect();
    if points.len() > MAX_STEPS {
        let bins = MAX_STEPS / 2;
        let width = end / bins as f64;
        let mut binned: Vec<(f64, f64)> = Vec::with_capacity(bins);
        for (x, y) in points {
            let start = (x / width).floor() * width;
            match binned.last_mut() {
                Some(last) if last.0 == start => last.1 = last.1.max(y),
                _ => binned.push((start, y)),
            }
        }
        points = binned;
    }
    let mut line = Vec::with_capacity(points.len() * 2 + 1);
    for (i, &(x, y)) in points.iter().enumerate() {
        if i > 0 {
            line.push((x, points[i - 1].1));
        }
        line.push((x, y));
    }
    if let Some(&(_, y)) = points.last() {
        line.push((end, y));
    }
    line
}

/// A duration in the unit that reads best.
fn span(ns: i64) -> String {
    match ns {
        n if n % 86_400_000_000_000 == 0 => format!("{} d", n / 86_400_000_000_000),
        n if n % 3_600_000_000_000 == 0 => format!("{} h", n / 3_600_000_000_000),
        n if n % 60_000_000_000 == 0 => format!("{} min", n / 60_000_000_000),
        n if n % 1_000_000_000 == 0 => format!("{} s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{} ms", n / 1_000_000),
        n => format!("{n} ns"),
    }
}
