//! The wall clock guests read (`wasi:clocks/wall-clock`): the system clock
//! plus an offset that tests can move, so token and session expiry is tested
//! without sleeping. Monotonic time (timeouts, sleeps) is never shifted.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmtime_wasi::HostWallClock;

#[derive(Clone, Default)]
pub struct Clock {
    offset_ms: Arc<AtomicI64>,
}

impl Clock {
    /// Moves every guest's wall clock forward (or back, if negative).
    pub fn advance(&self, by: Duration) {
        self.offset_ms.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }

    pub fn offset(&self) -> Duration {
        Duration::from_millis(self.offset_ms.load(Ordering::SeqCst).max(0) as u64)
    }
}

impl HostWallClock for Clock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let offset = self.offset_ms.load(Ordering::SeqCst);
        if offset >= 0 {
            now + Duration::from_millis(offset as u64)
        } else {
            now.saturating_sub(Duration::from_millis(offset.unsigned_abs()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_now_by_the_offset() {
        let clock = Clock::default();
        let before = clock.now();
        clock.advance(Duration::from_secs(1800));
        let after = clock.now();
        assert!(after - before >= Duration::from_secs(1800));
        assert!(after - before < Duration::from_secs(1801));
        assert_eq!(clock.offset(), Duration::from_secs(1800));
    }
}
