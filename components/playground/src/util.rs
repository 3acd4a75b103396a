//! Small pure helpers (base URLs: `guest_http::BaseUrl`; origins:
//! `guest_http::headers::origin_of`): ISO 8601 (hex: the `hex` crate;
//! SHA-256 hex: `gateway-ledger`, whose token hash it is; query strings: the
//! shared `query` crate).

use std::time::{Duration, UNIX_EPOCH};

pub use gateway_ledger::tokens::sha256_hex;
pub use guest_http::BaseUrl;
/// Lowercase hex of bytes.
pub use hex::encode as hex;

/// Unix seconds → `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC). The codec
/// covers 1970 to 9999; an instant outside prints as the nearest end of that
/// range (the Playground stores none).
pub fn iso8601(unix_s: i64) -> String {
    const LAST_SECOND_OF_9999: i64 = 253_402_300_799;
    let secs = unix_s.clamp(0, LAST_SECOND_OF_9999) as u64;
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_is_lowercase_hex() {
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn iso8601_formats_utc() {
        let known = [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_735_689_599, "2024-12-31T23:59:59Z"),
            (4_102_444_800, "2100-01-01T00:00:00Z"),
            // The ends of the codec's range.
            (-1, "1970-01-01T00:00:00Z"),
            (i64::MAX, "9999-12-31T23:59:59Z"),
        ];
        for (unix_s, text) in known {
            assert_eq!(iso8601(unix_s), text);
        }
    }
}
