//! Descriptive statistics over a handful of boots, and whether two groups
//! of boots differ by more than their noise.

/// The most common bin of values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mode {
    /// The bin's lower edge: the bin is [value, value + bin).
    pub value: f64,
    pub bin: f64,
    /// How many values fell in it.
    pub count: usize,
    /// Another bin holds as many values (the lowest such bin is reported).
    pub tied: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    /// None when every value sits in a bin of its own (n > 1): no value
    /// repeats at that resolution, so there is no mode to speak of.
    pub mode: Option<Mode>,
    /// Sample standard deviation (n - 1 in the denominator); None below
    /// two values.
    pub stddev: Option<f64>,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Standard error of the mean.
    pub fn sem(&self) -> Option<f64> {
        self.stddev.map(|s| s / (self.n as f64).sqrt())
    }
}

/// Which bin a value falls in. The small nudge keeps values that sit on
/// an edge (2.51 with bins of 0.01, which is 250.99999999999997 bins in
/// binary floating point) in the bin they are written in.
fn bin_of(x: f64, bin: f64) -> i64 {
    let q = x / bin;
    (q + q.abs().max(1.0) * 1e-9).floor() as i64
}

/// Summarises `values` (NaNs are ignored); None for no values. `bin` is
/// the width of the mode's bins, > 0.
pub fn summarize(values: &[f64], bin: f64) -> Option<Summary> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let stddev = (n > 1).then(|| {
        let ss: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
        (ss / (n - 1) as f64).sqrt()
    });
    Some(Summary {
        n,
        mean,
        median,
        mode: mode(&v, bin),
        stddev,
        min: v[0],
        max: v[n - 1],
    })
}

/// The value below which `q` (0..=1) of `values` lies, by the nearest-rank
/// method (so it is always one of the values); None for no values. NaNs
/// are ignored.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// `sorted` must be sorted.
fn mode(sorted: &[f64], bin: f64) -> Option<Mode> {
    let bin = if bin > 0.0 && bin.is_finite() {
        bin
    } else {
        1.0
    };
    let mut best: Option<(i64, usize)> = None;
    let mut tied = false;
    let mut i = 0;
    while i < sorted.len() {
        let b = bin_of(sorted[i], bin);
        let mut j = i;
        while j < sorted.len() && bin_of(sorted[j], bin) == b {
            j += 1;
        }
        let count = j - i;
        match best {
            Some((_, c)) if count == c => tied = true,
            Some((_, c)) if count < c => {}
            _ => {
                best = Some((b, count));
                tied = false;
            }
        }
        i = j;
    }
    let (b, count) = best?;
    if count == 1 && sorted.len() > 1 {
        return None;
    }
    Some(Mode {
        value: edge(b, bin),
        bin,
        count,
        tied,
    })
}

/// The lower edge of bin `b`. Bins narrower than 1 are divided out
/// rather than multiplied in, so that bin 94 of 0.01 is 0.94 and not
/// 0.9400000000000001.
fn edge(b: i64, bin: f64) -> f64 {
    if bin < 1.0 {
        let per_unit = (1.0 / bin).round();
        if ((1.0 / per_unit) - bin).abs() <= bin * 1e-12 {
            return b as f64 / per_unit;
        }
    }
    b as f64 * bin
}

/// A bin width for the mode when none is asked for: a tenth of the
/// median's order of magnitude, i.e. values are compared on their first
/// two significant digits (2.51 s and 2.58 s share the 2.5 s bin).
pub fn auto_bin(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values
        .iter()
        .map(|x| x.abs())
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.is_empty() {
        return 0.001;
    }
    v.sort_by(f64::total_cmp);
    let median = v[v.len() / 2];
    10f64.powi(median.log10().floor() as i32 - 1)
}

/// How a group differs from the baseline.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// other.mean - base.mean
    pub diff: f64,
    /// diff relative to the baseline's mean, in percent; None when that
    /// mean is 0.
    pub pct: Option<f64>,
    /// Combined standard error sqrt(s_a^2/n_a + s_b^2/n_b); None when a
    /// side has fewer than two values.
    pub se: Option<f64>,
    /// |diff| < se. None when se is unknown.
    pub within_noise: Option<bool>,
}

pub fn compare(base: &Summary, other: &Summary) -> Change {
    let diff = other.mean - base.mean;
    let pct = (base.mean != 0.0).then(|| diff / base.mean * 100.0);
    let se = match (base.sem(), other.sem()) {
        (Some(a), Some(b)) => Some((a * a + b * b).sqrt()),
        _ => None,
    };
    Change {
        diff,
        pct,
        se,
        within_noise: se.map(|se| diff.abs() < se),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn hand_computed() {
        // mean 14/5 = 2.8; deviations -0.8,-0.3,0.2,-0.3,1.2 squared sum
        // 0.64+0.09+0.04+0.09+1.44 = 2.3; /4 = 0.575; sqrt = 0.758287...
        let s = summarize(&[2.0, 2.5, 3.0, 2.5, 4.0], 0.5).unwrap();
        assert_eq!(s.n, 5);
        assert!(close(s.mean, 2.8));
        assert!(close(s.median, 2.5));
        assert!(close(s.stddev.unwrap(), 0.575f64.sqrt()));
        assert!(close(s.stddev.unwrap(), 0.758_287_544_405_155_6));
        assert_eq!((s.min, s.max), (2.0, 4.0));
        let m = s.mode.unwrap();
        assert_eq!((m.value, m.count, m.tied), (2.5, 2, false));
    }

    #[test]
    fn nearest_rank_quantiles() {
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.99), Some(4.0));
        assert_eq!(quantile(&[4.0, 1.0, 3.0, 2.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
        assert_eq!(quantile(&[7.0], 0.0), Some(7.0));
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&hundred, 0.99), Some(99.0));
        assert_eq!(quantile(&[], 0.99), None);
        assert_eq!(quantile(&[f64::NAN], 0.5), None);
    }

    // The lab's benchmarks once divided by n here, which gives sqrt(1.25)
    // for this sample; a handful of rounds or boots is a sample, and the
    // report has always said "sample standard deviation", so n - 1 it is.
    #[test]
    fn even_count_median_and_unsorted_input() {
        let s = summarize(&[4.0, 1.0, 3.0, 2.0], 1.0).unwrap();
        assert!(close(s.median, 2.5));
        assert!(close(s.mean, 2.5));
        // deviations 1.5,0.5,0.5,1.5: squares 2.25+0.25+0.25+2.25 = 5; /3
        assert!(close(s.stddev.unwrap(), (5.0f64 / 3.0).sqrt()));
    }

    #[test]
    fn mode_ties_take_the_lowest_bin() {
        // bins of 0.1: [1.2, 1.3) holds 1.21 and 1.25, [1.4, 1.5) holds
        // 1.40 and 1.49, [1.7, 1.8) holds 1.7.
        let s = summarize(&[1.49, 1.21, 1.7, 1.40, 1.25], 0.1).unwrap();
        let m = s.mode.unwrap();
        assert!(close(m.value, 1.2));
        assert_eq!((m.count, m.tied), (2, true));
        // A three-way bin beats the pairs.
        let s = summarize(&[1.49, 1.21, 1.41, 1.40, 1.25], 0.1).unwrap();
        let m = s.mode.unwrap();
        assert!(close(m.value, 1.4));
        assert_eq!((m.count, m.tied), (3, false));
    }

    #[test]
    fn values_on_a_bin_edge_stay_in_it() {
        let s = summarize(&[2.51, 2.51, 2.50], 0.01).unwrap();
        let m = s.mode.unwrap();
        assert!(close(m.value, 2.51), "{m:?}");
        assert_eq!(m.count, 2);
    }

    #[test]
    fn bin_edges_print_as_written() {
        assert_eq!(edge(94, 0.01), 0.94);
        assert_eq!(edge(12, 0.1), 1.2);
        assert_eq!(edge(3, 0.25), 0.75);
        assert_eq!(edge(7, 2.0), 14.0);
        assert_eq!(edge(-3, 0.1), -0.3);
    }

    #[test]
    fn no_mode_when_nothing_repeats() {
        let s = summarize(&[1.0, 2.0, 3.0], 0.1).unwrap();
        assert_eq!(s.mode, None);
    }

    #[test]
    fn a_single_run() {
        let s = summarize(&[3.25], 0.1).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.min, s.max),
            (1, 3.25, 3.25, 3.25, 3.25)
        );
        assert_eq!(s.stddev, None);
        assert_eq!(s.sem(), None);
        let m = s.mode.unwrap();
        assert!(close(m.value, 3.2));
        assert_eq!((m.count, m.tied), (1, false));
        assert!(summarize(&[], 0.1).is_none());
        assert!(summarize(&[f64::NAN], 0.1).is_none());
    }

    #[test]
    fn auto_bins() {
        assert!(close(auto_bin(&[2.51, 2.6, 2.4]), 0.1));
        assert!(close(auto_bin(&[0.0042, 0.005]), 0.0001));
        assert!(close(auto_bin(&[75.0, 49.0, 83.0]), 1.0));
        assert!(close(auto_bin(&[]), 0.001));
        assert!(close(auto_bin(&[0.0]), 0.001));
    }

    #[test]
    fn change_and_noise() {
        // a: 1,2,3 mean 2 sd 1 sem 1/sqrt3; b: 2,3,4 mean 3 sd 1.
        // se = sqrt(1/3 + 1/3) = 0.8165 < diff 1: beyond the noise.
        let a = summarize(&[1.0, 2.0, 3.0], 1.0).unwrap();
        let b = summarize(&[2.0, 3.0, 4.0], 1.0).unwrap();
        let c = compare(&a, &b);
        assert!(close(c.diff, 1.0));
        assert!(close(c.pct.unwrap(), 50.0));
        assert!(close(c.se.unwrap(), (2.0f64 / 3.0).sqrt()));
        assert_eq!(c.within_noise, Some(false));
        // b': 1.5,2.5,3.5: diff 0.5 < 0.8165.
        let b2 = summarize(&[1.5, 2.5, 3.5], 1.0).unwrap();
        assert_eq!(compare(&a, &b2).within_noise, Some(true));
        // A single run on one side: no verdict.
        let one = summarize(&[2.0], 1.0).unwrap();
        let c = compare(&one, &b);
        assert_eq!((c.se, c.within_noise), (None, None));
        let zero = summarize(&[0.0, 0.0], 1.0).unwrap();
        assert_eq!(compare(&zero, &b).pct, None);
    }
}
