//! The data every part of the orchestrator shares: the implementations
//! compared, and the values measured of each.

use std::collections::BTreeMap;

/// The implementations, in table order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Impl {
    Zklock,
    Zkrs,
    Curator,
    Kazoo,
}

impl Impl {
    pub const ALL: [Impl; 4] = [Impl::Zklock, Impl::Zkrs, Impl::Curator, Impl::Kazoo];

    pub fn key(self) -> &'static str {
        match self {
            Impl::Zklock => "zklock",
            Impl::Zkrs => "zkrs",
            Impl::Curator => "curator",
            Impl::Kazoo => "kazoo",
        }
    }

    /// The implementation whose [`Impl::key`] is `key`.
    pub fn from_key(key: &str) -> Option<Impl> {
        Impl::ALL.into_iter().find(|i| i.key() == key)
    }

    pub fn label(self) -> &'static str {
        match self {
            Impl::Zklock => "zklock",
            Impl::Zkrs => "zookeeper-client-rs",
            Impl::Curator => "Curator",
            Impl::Kazoo => "kazoo",
        }
    }
}

/// Every value measured, by row key and implementation (one per round), and
/// why a cell is empty where it is.
#[derive(Default)]
pub struct Results {
    pub values: BTreeMap<String, BTreeMap<Impl, Vec<f64>>>,
    pub notes: BTreeMap<(String, Impl), String>,
}

impl Results {
    pub fn put(&mut self, key: &str, imp: Impl, v: f64) {
        self.values
            .entry(key.to_owned())
            .or_default()
            .entry(imp)
            .or_default()
            .push(v);
    }

    pub fn note(&mut self, prefix: &str, imp: Impl, why: &str) {
        self.notes.insert((prefix.to_owned(), imp), why.to_owned());
    }

    /// The values of a run's `values.tsv` (key, implementation, one value
    /// per round), as the orchestrator wrote them; no notes.
    pub fn from_tsv(text: &str) -> Results {
        let mut r = Results::default();
        for line in text.lines().skip(1) {
            let mut cols = line.split('\t');
            let (Some(key), Some(imp)) = (cols.next(), cols.next().and_then(Impl::from_key)) else {
                continue;
            };
            for v in cols.filter_map(|v| v.parse::<f64>().ok()) {
                r.put(key, imp, v);
            }
        }
        r
    }

    /// The median over rounds, NaN when there is none.
    pub fn get(&self, key: &str, imp: Impl) -> f64 {
        let mut v: Vec<f64> = self
            .values
            .get(key)
            .and_then(|m| m.get(&imp))
            .map(|v| v.iter().copied().filter(|x| x.is_finite()).collect())
            .unwrap_or_default();
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// The sum over rounds (for counts that must be 0), NaN when there is none.
    pub fn sum(&self, key: &str, imp: Impl) -> f64 {
        let v: Vec<f64> = self
            .values
            .get(key)
            .and_then(|m| m.get(&imp))
            .map(|v| v.iter().copied().filter(|x| x.is_finite()).collect())
            .unwrap_or_default();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum()
        }
    }

    /// The best of the peers' values on `key` (the highest when `higher`),
    /// NaN when no peer has one.
    pub fn best_peer(&self, key: &str, higher: bool) -> f64 {
        let peers = Impl::ALL[1..]
            .iter()
            .map(|&i| self.get(key, i))
            .filter(|v| v.is_finite());
        if higher {
            peers.fold(f64::NAN, f64::max)
        } else {
            peers.fold(f64::NAN, f64::min)
        }
    }

    /// The note of the first prefix of `key` that has one.
    pub fn note_for(&self, key: &str, imp: Impl) -> Option<&str> {
        self.notes
            .iter()
            .find(|((p, i), _)| *i == imp && key.starts_with(p.as_str()))
            .map(|(_, n)| n.as_str())
    }
}
