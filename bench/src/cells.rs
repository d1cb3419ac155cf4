//! How a value is written in RESULTS.md: numbers, a row's value for one
//! implementation, zklock's ratio to the best peer, and empty cells.

use crate::model::{Impl, Results};
use crate::rows::{Better, Row};

pub fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v.abs() >= 1000.0 || (v.fract() == 0.0 && v.abs() < 1e9) {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 || v == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The value of `imp` on a row, for the zklock key or the peers' key.
pub fn value(r: &Results, row: &Row, imp: Impl) -> f64 {
    r.get(
        if imp == Impl::Zklock {
            &row.zkey
        } else {
            &row.pkey
        },
        imp,
    )
}

/// zklock ÷ the best peer (lowest, or highest for ↑ rows).
pub fn ratio_to_best_peer(r: &Results, row: &Row) -> Option<f64> {
    let z = value(r, row, Impl::Zklock);
    let best = match row.better {
        Better::Lower => r.best_peer(&row.pkey, false),
        Better::Higher => r.best_peer(&row.pkey, true),
        Better::Neither => return None,
    };
    (z.is_finite() && best.is_finite() && best != 0.0).then(|| z / best)
}

pub fn cell(r: &Results, row: &Row, imp: Impl) -> String {
    let v = value(r, row, imp);
    if v.is_finite() {
        return fmt_num(v);
    }
    let key = if imp == Impl::Zklock {
        &row.zkey
    } else {
        &row.pkey
    };
    match r.note_for(key, imp) {
        Some(n) if n.starts_with("n/a") => "n/a".into(),
        Some(n) if n.starts_with("not run") => "not run".into(),
        Some(_) => "failed".into(),
        None => "–".into(),
    }
}
