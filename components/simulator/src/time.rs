//! RFC 3339 timestamps from Unix milliseconds (UTC, `Z`): the `humantime` codec.

use std::time::{Duration, UNIX_EPOCH};

/// `2026-12-02T10:11:12.345Z`. The codec ends with year 9999; a later instant prints as
/// its last millisecond (no clock or stored time gets there).
pub fn rfc3339_millis(ms: u64) -> String {
    const LAST_MILLI_OF_9999: u64 = 253_402_300_799_999;
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms.min(LAST_MILLI_OF_9999))).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_millis(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(rfc3339_millis(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
        assert_eq!(rfc3339_millis(1_735_689_600_000), "2025-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
        assert_eq!(rfc3339_millis(u64::MAX), "9999-12-31T23:59:59.999Z");
    }
}
