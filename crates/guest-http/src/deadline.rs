//! A deadline that moves on every event but is watched by a host timer armed
//! only when it fires: moving it costs no host call. Instants are monotonic
//! clock nanoseconds, as `wasi:clocks/monotonic-clock` gives them.

use std::time::Duration;

/// `after` past the last [`Deadline::touch`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    after: u64,
    last: u64,
}

impl Deadline {
    pub(crate) fn new(now: u64, after: Duration) -> Self {
        Deadline { after: after.as_nanos() as u64, last: now }
    }

    /// Where the timer is first armed.
    pub(crate) fn due(&self) -> u64 {
        self.last.saturating_add(self.after)
    }

    pub(crate) fn touch(&mut self, now: u64) {
        self.last = now;
    }

    /// The timer fired at `now`: whether the deadline has passed, and where
    /// to arm the timer again (a fired timer stays ready). A deadline that
    /// moved since is armed for its new place; a passed one, `after` from now.
    pub(crate) fn fired(&self, now: u64) -> (bool, u64) {
        if now >= self.due() {
            (true, now.saturating_add(self.after))
        } else {
            (false, self.due())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_touch_moves_the_deadline_and_the_timer_follows_it_when_it_fires() {
        let mut d = Deadline::new(1_000 * MS, Duration::from_millis(100));
        assert_eq!(d.due(), 1_100 * MS);
        d.touch(1_050 * MS);
        assert_eq!(d.fired(1_100 * MS), (false, 1_150 * MS), "moved: not passed, armed for the new place");
        assert_eq!(d.fired(1_150 * MS), (true, 1_250 * MS), "passed: armed a full interval on");
    }

    #[test]
    fn an_untouched_deadline_passes_when_its_timer_fires_late() {
        let d = Deadline::new(0, Duration::from_secs(15));
        assert_eq!(d.fired(15_000 * MS + 7), (true, 30_000 * MS + 7));
        assert_eq!(d.fired(15_000 * MS - 1), (false, 15_000 * MS));
    }

    #[test]
    fn far_deadlines_saturate_instead_of_wrapping() {
        let d = Deadline::new(u64::MAX - 5, Duration::from_secs(1));
        assert_eq!(d.due(), u64::MAX);
        assert_eq!(d.fired(u64::MAX), (true, u64::MAX));
    }
}
