//! Anyone on the machine can send netlink messages to a uevent socket, so
//! a warning per dropped message would let any user flood the log. The
//! warning is let through a few times, then once per interval with how
//! many were held back.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct RateLimit {
    burst: u32,
    interval: Duration,
    passed: u32,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimit {
    /// The first `burst` pass; after that, one per `interval`.
    pub fn new(burst: u32, interval: Duration) -> RateLimit {
        RateLimit {
            burst,
            interval,
            passed: 0,
            last: None,
            suppressed: 0,
        }
    }

    /// Whether to log at `now`: `Some(n)` when it should, `n` being how
    /// many were held back since the last one that was logged.
    pub fn check(&mut self, now: Instant) -> Option<u64> {
        let due = match self.last {
            _ if self.passed < self.burst => true,
            Some(last) => now.saturating_duration_since(last) >= self.interval,
            None => true,
        };
        if !due {
            self.suppressed += 1;
            return None;
        }
        self.passed = self.passed.saturating_add(1);
        self.last = Some(now);
        Some(std::mem::take(&mut self.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_interval_with_the_count_held_back() {
        let mut r = RateLimit::new(3, Duration::from_secs(1));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(r.check(at(0)), Some(0));
        assert_eq!(r.check(at(1)), Some(0));
        assert_eq!(r.check(at(2)), Some(0));
        for ms in 3..1000 {
            assert_eq!(r.check(at(ms)), None);
        }
        assert_eq!(r.check(at(1002)), Some(997));
        assert_eq!(r.check(at(1500)), None);
        assert_eq!(r.check(at(2002)), Some(1));
    }
}
