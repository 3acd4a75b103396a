//! The console API's envelopes, one function each: every failure the console
//! sees is `{"error_code": "...", ...}` with a fixed message, never upstream
//! text and never a key. Only this module builds an [`ApiError`]; the kit's
//! own cross-component envelopes (`method_not_allowed`,
//! `unsupported_media_type`, `host_not_allowed`) stay on the type.

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

// ---- the browser's request -------------------------------------------------------------------

pub fn missing_agent_id() -> ApiError {
    ApiError::new(400, "missing_agent_id", "agent_id is required")
}

/// The same refusal for a JSON body's field.
pub fn missing_agent_id_field() -> ApiError {
    ApiError::new(400, "missing_agent_id", "agent_id (a string) is required")
}

pub fn invalid_session_id() -> ApiError {
    ApiError::new(400, "invalid_session_id", "session ids are 1-128 characters of A-Z a-z 0-9 _ -")
}

pub fn invalid_turn_id() -> ApiError {
    ApiError::new(400, "invalid_turn_id", "turn ids are 1-128 characters of A-Z a-z 0-9 _ -")
}

pub fn invalid_agent_id() -> ApiError {
    ApiError::new(400, "invalid_agent_id", "agent ids are 1-64 characters of A-Z a-z 0-9 _ -")
}

pub fn invalid_last_event_id() -> ApiError {
    ApiError::new(400, "invalid_last_event_id", "Last-Event-ID must be a non-negative integer")
}

pub fn missing_text() -> ApiError {
    ApiError::new(400, "missing_text", "text (a string) is required")
}

pub fn invalid_text() -> ApiError {
    ApiError::new(400, "invalid_text", "text must be 1-32768 characters")
}

pub fn invalid_json() -> ApiError {
    ApiError::new(400, "invalid_json", "the body must be a JSON object")
}

/// The request body's stream broke before its end.
pub fn body_unreadable() -> ApiError {
    ApiError::new(400, "invalid_json", "the request body was not readable")
}

pub fn body_too_large() -> ApiError {
    ApiError::new(413, "body_too_large", "the request body is larger than 64 KiB")
}

/// A write without the JSON content type from another origin (a form post).
pub fn cross_origin_rejected() -> ApiError {
    ApiError::new(
        403,
        "cross_origin_rejected",
        "a write that is not JSON is accepted from the console's own origin only",
    )
}

// ---- access ------------------------------------------------------------------------------------

pub fn console_sign_in_required() -> ApiError {
    ApiError::new(401, "console_sign_in_required", "this console requires a signed-in Playground session")
}

pub fn console_role_required(role: &'static str) -> ApiError {
    ApiError::new(403, "console_role_required", "this session's user lacks the console's role").with("role", role)
}

pub fn console_access_unavailable() -> ApiError {
    ApiError::new(503, "console_access_unavailable", "the console's session check could not be made")
}

// ---- state -------------------------------------------------------------------------------------

pub fn affect_not_found() -> ApiError {
    ApiError::new(404, "affect_not_found", "no affect snapshot for this agent yet").with("status", 404)
}

/// The history store could not be read (or there is none, as on a runtime without key-value).
pub fn history_unavailable() -> ApiError {
    ApiError::new(503, "affect_history_unavailable", "the affect history store is unavailable")
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_http::catalog::{catalog_source, codes_built_in, documented_codes, envelopes_built_outside};
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

    #[test]
    fn every_code_of_the_catalog_is_in_the_openapi_document() {
        let built = codes_built_in(catalog_source(include_str!("error.rs")));
        assert!(
            built.len() > 20 && built.contains("upstream_timeout") && built.contains("console_role_required"),
            "{built:?}"
        );
        let documented = documented_codes(include_str!("../../../static/openapi.yaml"));
        let missing: Vec<_> = built.difference(&documented).collect();
        assert!(
            missing.is_empty(),
            "error codes the console answers but static/openapi.yaml does not name: {missing:?}"
        );
    }

    #[test]
    fn no_envelope_is_built_outside_the_catalog() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let offenders = envelopes_built_outside(&src, |name| name == "error.rs");
        assert!(offenders.is_empty(), "build these envelopes in error.rs: {offenders:?}");
    }
}
