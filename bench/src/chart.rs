//! bench/results.svg, drawn by hand: every implementation as a multiple
//! of the best on each row.

use std::fmt::Write as _;

use crate::cells::value;
use crate::model::{Impl, Results};
use crate::rows::{rows, Better, Row};
use crate::sizes::Sizes;

/// The chart's rows: every ranked row of each server setting's table,
/// labelled with the setting.
pub fn chart_rows(r: &Results, s: &Sizes, fsync: &[bool]) -> Vec<(String, Row)> {
    let mut v = Vec::new();
    for (i, &f) in fsync.iter().enumerate() {
        let fs = if f { "on" } else { "off" };
        for row in rows(s, r, fs, i == 0) {
            if row.better != Better::Neither {
                v.push((format!("[fsync {fs}] {}", row.label), row));
            }
        }
    }
    v
}

const COLORS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A horizontal bar per implementation and row: how many times worse than
/// the best of the four on that row (1× = best), on a log scale to 100×.
pub fn svg(r: &Results, rows: &[(String, Row)]) -> String {
    // Wide enough for the longest label (about 6 px a character at 11 px).
    let longest = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let label_w = (longest as f64 * 6.0 + 20.0).max(560.0).round();
    let plot_w = 420.0;
    let bar_h = 7.0;
    let gap = 12.0;
    let top = 60.0;
    let group_h = 4.0 * bar_h + gap;
    let drawn: Vec<(&String, [f64; 4])> = rows
        .iter()
        .filter_map(|(label, row)| {
            let vals = Impl::ALL.map(|i| value(r, row, i));
            let finite: Vec<f64> = vals
                .iter()
                .copied()
                .filter(|v| v.is_finite() && *v > 0.0)
                .collect();
            if finite.len() < 2 {
                return None;
            }
            let best = match row.better {
                Better::Higher => finite.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                _ => finite.iter().copied().fold(f64::INFINITY, f64::min),
            };
            let ratios = vals.map(|v| {
                if !(v.is_finite() && v > 0.0) {
                    f64::NAN
                } else if row.better == Better::Higher {
                    best / v
                } else {
                    v / best
                }
            });
            Some((label, ratios))
        })
        .collect();
    let height = top + drawn.len() as f64 * group_h + 40.0;
    let width = label_w + plot_w + 80.0;
    let x_of = |ratio: f64| label_w + plot_w * (ratio.clamp(1.0, 100.0).log10() / 2.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">Times the best implementation on each row (1× = best; shorter is better; log scale, cut at 100×)</text>"#
    );
    for (i, imp) in Impl::ALL.iter().enumerate() {
        let x = 10.0 + i as f64 * 170.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="32" width="12" height="10" fill="{}"/><text x="{}" y="41">{}</text>"#,
            COLORS[i],
            x + 16.0,
            imp.label()
        );
    }
    for tick in [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0] {
        let x = x_of(tick);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{:.1}" stroke="#ccc"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#555">{tick}×</text>"##,
            top - 6.0,
            height - 30.0,
            height - 16.0
        );
    }
    for (gi, (label, ratios)) in drawn.iter().enumerate() {
        let y0 = top + gi as f64 * group_h;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y0 + 2.0 * bar_h + 3.0,
            esc(label)
        );
        for (i, ratio) in ratios.iter().enumerate() {
            let y = y0 + i as f64 * bar_h;
            if !ratio.is_finite() {
                let _ = writeln!(
                    s,
                    r##"<text x="{:.1}" y="{:.1}" font-size="7" fill="#999">n/a</text>"##,
                    label_w + 2.0,
                    y + bar_h - 1.0
                );
                continue;
            }
            let w = (x_of(*ratio) - label_w).max(1.5);
            let _ = writeln!(
                s,
                r#"<rect x="{label_w}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="7">{}×</text>"#,
                bar_h - 1.0,
                COLORS[i],
                label_w + w + 3.0,
                y + bar_h - 1.0,
                if *ratio >= 10.0 {
                    format!("{ratio:.0}")
                } else {
                    format!("{ratio:.2}")
                }
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
