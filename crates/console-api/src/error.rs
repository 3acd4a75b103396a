//! The console API's own envelopes, built on the kit's [`ApiError`]: every
//! failure the console sees is `{"error_code": "...", ...}` with a fixed
//! message, never upstream text and never a key.

use guest_http::{ApiError, TransportFailure};

/// An upstream non-2xx, passed on with its status (the seed's
/// status-preserving envelope: `{error_code, status}` at that status).
pub fn upstream_status(code: &'static str, status: u16) -> ApiError {
    // A 1xx/2xx/3xx here would be a lie to the browser; only 4xx/5xx pass.
    let http_status = if (400..=599).contains(&status) { status } else { 502 };
    ApiError::new(http_status, code, "the upstream refused the request").with("status", status)
}

/// An upstream call that gave no usable answer, as the `upstream_*` envelope.
pub fn transport(failure: TransportFailure) -> ApiError {
    match failure {
        TransportFailure::Unreachable => {
            ApiError::new(502, "upstream_unreachable", "the upstream could not be reached")
        }
        TransportFailure::Timeout => ApiError::new(504, "upstream_timeout", "the upstream did not answer in time"),
        TransportFailure::NotAllowed => {
            ApiError::new(502, "upstream_not_allowed", "the upstream's origin is not in allowed_outbound_hosts")
        }
        TransportFailure::TooLarge => {
            ApiError::new(502, "upstream_body_too_large", "the upstream's answer was too large")
        }
    }
}

/// The upstream's body was not what the contract says (not UTF-8 JSON).
pub fn upstream_malformed() -> ApiError {
    ApiError::new(502, "upstream_malformed", "the upstream's answer was not valid JSON")
}

pub fn not_found() -> ApiError {
    ApiError::new(404, "not_found", "no such API route")
}

/// INV-FAIL-VISIBLE: an admin route without an admin key says so.
pub fn admin_key_not_configured() -> ApiError {
    ApiError::new(400, "admin_key_not_configured", "the server has no admin key configured")
}

pub fn misconfigured(message: &'static str) -> ApiError {
    ApiError::new(500, "server_misconfigured", message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn envelopes_are_typed_and_status_preserving() {
        let e = upstream_status("session_tools_unavailable", 404);
        assert_eq!(e.status, 404);
        let v: Value = serde_json::from_str(&e.body()).unwrap();
        assert_eq!(v["error_code"], "session_tools_unavailable");
        assert_eq!(v["status"], 404);
        // A non-error upstream status never becomes a success to the browser.
        assert_eq!(upstream_status("x", 204).status, 502);
        assert_eq!(upstream_status("x", 302).status, 502);
        let t = transport(TransportFailure::Timeout);
        assert_eq!((t.status, t.code), (504, "upstream_timeout"));
        let u = transport(TransportFailure::Unreachable);
        assert_eq!((u.status, u.code), (502, "upstream_unreachable"));
        let n = transport(TransportFailure::NotAllowed);
        assert_eq!((n.status, n.code), (502, "upstream_not_allowed"));
        let l = transport(TransportFailure::TooLarge);
        assert_eq!((l.status, l.code), (502, "upstream_body_too_large"));
        assert_eq!((upstream_malformed().status, upstream_malformed().code), (502, "upstream_malformed"));
    }
}
