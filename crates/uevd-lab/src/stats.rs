//! Summary statistics for timings.

/// n, mean, median, p99, standard deviation, min and max of a sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub p99: f64,
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

/// The value below which `q` (0..=1) of the sorted sample lies, by the
/// nearest-rank method.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn summarize(values: &[f64]) -> Option<Summary> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    Some(Summary {
        n,
        mean,
        median,
        p99: quantile(&v, 0.99),
        stddev: var.sqrt(),
        min: v[0],
        max: v[n - 1],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed() {
        let s = summarize(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.n, 4);
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.median, 2.5);
        assert_eq!(s.p99, 4.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 4.0);
        assert!((s.stddev - 1.25f64.sqrt()).abs() < 1e-12);
        let one = summarize(&[7.0]).unwrap();
        assert_eq!((one.median, one.p99, one.stddev), (7.0, 7.0, 0.0));
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(summarize(&hundred).unwrap().p99, 99.0);
        assert!(summarize(&[]).is_none());
    }
}
