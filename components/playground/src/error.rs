//! The Playground's error catalog: every envelope it answers with, one named
//! function each (`error::not_found()`), built on `guest_http`'s [`ApiError`]
//! (`{"error_code", "message", ...}`). Messages are fixed text (plus typed
//! fields such as `reason`, `status`, `retry_after`, passed in by the module
//! that decides them), never provider text, never a key, hash or token.
//!
//! The rule: no `ApiError::new` outside this file (tests excepted). Only the
//! kit's cross-component envelopes stay associated functions of
//! [`ApiError`]: `method_not_allowed`, `unsupported_media_type` and
//! `host_not_allowed`. A code with two fixed texts has two functions, next
//! to each other below. A storage failure ([`crate::db::DbError`]) becomes
//! 500 `storage_error` through `gateway-ledger`'s `From` (its `envelope`
//! feature). Every code here is in static/openapi.yaml (the test below).

use serde_json::json;

pub use guest_http::ApiError;

// ---- routing and request bodies --------------------------------------------------------

pub fn not_found() -> ApiError {
    ApiError::new(404, "not_found", "no such Playground API route")
}

pub fn invalid_json() -> ApiError {
    ApiError::new(400, "invalid_json", "the body must be a JSON object")
}

/// `invalid_json` for a request body whose stream broke before its end.
pub fn body_unreadable() -> ApiError {
    ApiError::new(400, "invalid_json", "the request body was not readable")
}

pub fn body_too_large() -> ApiError {
    ApiError::new(413, "body_too_large", "the request body is larger than 16 KiB")
}

pub fn misconfigured(message: &'static str) -> ApiError {
    ApiError::new(500, "server_misconfigured", message)
}

/// `storage_error` before any statement: the database did not open.
pub fn storage_not_opened() -> ApiError {
    ApiError::new(500, "storage_error", "the Playground database could not be opened")
}

// ---- ids and query parameters ----------------------------------------------------------

pub fn invalid_gateway_id() -> ApiError {
    ApiError::new(400, "invalid_gateway_id", "gateway_id is required: 1-128 characters of A-Z a-z 0-9 _ -")
}

pub fn invalid_trace_id() -> ApiError {
    ApiError::new(400, "invalid_trace_id", "trace ids are 1-128 characters of A-Z a-z 0-9 _ -")
}

pub fn invalid_user_id() -> ApiError {
    ApiError::new(400, "invalid_user_id", "user_id is required: 1-128 characters of A-Z a-z 0-9 _ -")
}

pub fn invalid_query() -> ApiError {
    ApiError::new(400, "invalid_query", "q is required: 1-400 characters, not only spaces")
}

pub fn invalid_limit() -> ApiError {
    ApiError::new(400, "invalid_limit", "limit is an integer from 1 to 100")
}

// ---- sessions and sign-in --------------------------------------------------------------

pub fn unauthenticated() -> ApiError {
    ApiError::new(
        401,
        "unauthenticated",
        "sign in first: send the session cookie or Authorization: Bearer <session token>",
    )
}

pub fn session_expired() -> ApiError {
    ApiError::new(401, "session_expired", "the session has expired or was revoked: sign in again")
}

/// `reason`: `content_type`, `origin_missing` or `origin_mismatch`.
pub fn csrf_rejected(reason: &'static str) -> ApiError {
    ApiError::new(
        403,
        "csrf_rejected",
        "cookie-authenticated writes need Content-Type: application/json and a same-origin Origin",
    )
    .with("reason", reason)
}

/// `invalid_request` of the sign-in body; `field` is `email` or `password`.
pub fn invalid_login_field(field: &'static str) -> ApiError {
    ApiError::new(
        400,
        "invalid_request",
        "email and password are required strings (email at most 254, password at most 1024 characters)",
    )
    .with("field", field)
}

/// `invalid_request` of the password-change body; `field` is
/// `current_password` or `new_password`.
pub fn invalid_password_field(field: &'static str) -> ApiError {
    ApiError::new(
        400,
        "invalid_request",
        "current_password and new_password are required strings of at most 1024 characters",
    )
    .with("field", field)
}

pub fn invalid_credentials() -> ApiError {
    ApiError::new(401, "invalid_credentials", "the email or password is wrong")
}

/// Too many failed sign-ins: wait `seconds` (body and `Retry-After`).
pub fn rate_limited(seconds: i64) -> ApiError {
    ApiError::new(429, "rate_limited", "too many failed sign-ins: wait before trying again")
        .with("retry_after", seconds)
        .header("retry-after", seconds.to_string())
}

pub fn password_too_short(min_length: usize) -> ApiError {
    ApiError::new(400, "password_too_short", "the new password must have at least 12 characters")
        .with("min_length", min_length as i64)
}

pub fn wrong_password() -> ApiError {
    ApiError::new(403, "wrong_password", "the current password is wrong")
}

pub fn user_not_found() -> ApiError {
    ApiError::new(404, "user_not_found", "no such user")
}

// ---- roles and impersonation -----------------------------------------------------------

pub fn insufficient_role() -> ApiError {
    ApiError::new(403, "insufficient_role", "your role on this gateway does not allow this")
}

/// `insufficient_role` of the impersonation route.
pub fn not_platform_admin() -> ApiError {
    ApiError::new(403, "insufficient_role", "only platform admins can impersonate")
}

/// The credential is an impersonation.
pub fn impersonation_forbidden() -> ApiError {
    ApiError::new(403, "impersonation_forbidden", "not allowed while impersonating a user")
}

/// `impersonation_forbidden` for a platform admin as the target.
pub fn platform_admin_not_impersonable() -> ApiError {
    ApiError::new(403, "impersonation_forbidden", "platform admins cannot be impersonated")
}

pub fn gateway_not_found() -> ApiError {
    ApiError::new(404, "gateway_not_found", "no such gateway, or you have no access to it")
}

pub fn trace_not_found() -> ApiError {
    ApiError::new(404, "trace_not_found", "no such trace, or you have no access to it")
}

// ---- the search probe ------------------------------------------------------------------

pub fn feature_disabled() -> ApiError {
    ApiError::new(403, "feature_disabled", "the Playground is turned off for this tenant (playground_enabled)")
}

/// The EU gate refused; `reason` says who enforces it and why (the gate in
/// `search` words it), `provider` is the refused one when it is known.
pub fn eu_gate_refused(reason: String, provider: Option<&'static str>, gateway_eu: bool, tenant_eu: bool) -> ApiError {
    let e = ApiError::new(
        403,
        "eu_gate_refused",
        "EU data residency: the probe never sends a query to a provider outside the EU",
    )
    .with("reason", reason);
    let e = match provider {
        Some(p) => e.with("provider", p),
        None => e,
    };
    e.with("eu_region_routing", json!({ "gateway": gateway_eu, "tenant": tenant_eu }))
}

pub fn search_provider_unsupported() -> ApiError {
    ApiError::new(503, "search_provider_unsupported", "the gateway's web-search provider is not supported")
}

pub fn search_key_missing(provider: &'static str) -> ApiError {
    ApiError::new(
        503,
        "search_key_missing",
        "this gateway has no stored web_search.api_key; the Playground search probe uses only the gateway's own key (never the platform Linkup key of the inference path), so store a key on the gateway to use it",
    )
    .with("provider", provider)
}

/// A provider's answer, classified (`search::classify_status` /
/// `classify_transport`): every one names the `provider`, and those from a
/// status carry it as `status`.
fn provider_answer(e: ApiError, provider: &'static str, status: Option<u16>) -> ApiError {
    let e = e.with("provider", provider);
    match status {
        Some(status) => e.with("status", status),
        None => e,
    }
}

pub fn provider_auth_failed(provider: &'static str, status: u16) -> ApiError {
    let e = ApiError::new(502, "provider_auth_failed", "the web-search provider refused the gateway's stored key");
    provider_answer(e, provider, Some(status))
}

/// Wait `seconds` (body and `Retry-After`).
pub fn provider_rate_limited(provider: &'static str, status: u16, seconds: u64) -> ApiError {
    let e = ApiError::new(429, "provider_rate_limited", "the web-search provider is rate-limiting this gateway's key")
        .with("retry_after", seconds)
        .header("retry-after", seconds.to_string());
    provider_answer(e, provider, Some(status))
}

pub fn provider_unavailable(provider: &'static str, status: u16) -> ApiError {
    provider_answer(
        ApiError::new(502, "provider_unavailable", "the web-search provider failed"),
        provider,
        Some(status),
    )
}

pub fn provider_error(provider: &'static str, status: u16) -> ApiError {
    let e = ApiError::new(502, "provider_error", "the web-search provider rejected the request");
    provider_answer(e, provider, Some(status))
}

pub fn provider_timeout(provider: &'static str) -> ApiError {
    let e = ApiError::new(504, "provider_timeout", "the web-search provider did not answer in time");
    provider_answer(e, provider, None)
}

pub fn provider_unreachable(provider: &'static str) -> ApiError {
    let e = ApiError::new(502, "provider_unreachable", "the web-search provider could not be reached");
    provider_answer(e, provider, None)
}

pub fn provider_not_allowed(provider: &'static str) -> ApiError {
    let e = ApiError::new(
        502,
        "provider_not_allowed",
        "the provider's origin is not in allowed_outbound_hosts (set brave_origin / linkup_origin with the base URL)",
    );
    provider_answer(e, provider, None)
}

/// Not the documented JSON, or larger than the probe reads.
pub fn provider_malformed(provider: &'static str) -> ApiError {
    let e = ApiError::new(502, "provider_malformed", "the web-search provider's answer was not the expected JSON");
    provider_answer(e, provider, None)
}

// ---- the inference pass-through --------------------------------------------------------

pub fn invalid_slug() -> ApiError {
    ApiError::new(400, "invalid_slug", "tenant and gateway slugs are 1-64 characters of A-Z a-z 0-9 _ -")
}

pub fn inference_timeout() -> ApiError {
    ApiError::new(504, "inference_timeout", "the gateway inference endpoint did not answer in time")
}

pub fn inference_unreachable() -> ApiError {
    ApiError::new(502, "inference_unreachable", "the gateway inference endpoint could not be reached")
}

/// The upstream answered with a content type the console may not receive;
/// `status` is the upstream's.
pub fn upstream_content_type(status: u16) -> ApiError {
    ApiError::new(
        502,
        "upstream_content_type",
        "the gateway inference endpoint answered with a content type other than JSON or an event stream",
    )
    .with("status", status as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_http::catalog::{catalog_source, codes_built_in, documented_codes, envelopes_built_outside};
    use serde_json::Value;

    #[test]
    fn every_code_of_the_catalog_is_in_the_openapi_document() {
        let built = codes_built_in(catalog_source(include_str!("error.rs")));
        assert!(
            built.len() > 30 && built.contains("not_found") && built.contains("upstream_content_type"),
            "{built:?}"
        );
        let documented = documented_codes(include_str!("../../../static/openapi.yaml"));
        assert!(documented.contains("host_not_allowed") && documented.contains("method_not_allowed"), "{documented:?}");
        let missing: Vec<_> = built.difference(&documented).collect();
        assert!(
            missing.is_empty(),
            "error codes the Playground answers but static/openapi.yaml does not name: {missing:?}"
        );
    }

    #[test]
    fn no_envelope_is_built_outside_the_catalog() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let offenders = envelopes_built_outside(&src, |name| {
            name == "error.rs" || name.starts_with("api_tests") || name.ends_with("_tests.rs")
        });
        assert!(offenders.is_empty(), "build these envelopes in error.rs: {offenders:?}");
    }

    #[test]
    fn envelopes_are_typed_with_fields_and_headers() {
        let c = csrf_rejected("origin_mismatch");
        let v: Value = serde_json::from_str(&c.body()).unwrap();
        assert_eq!(
            (c.status, v["error_code"].as_str(), v["reason"].as_str()),
            (403, Some("csrf_rejected"), Some("origin_mismatch"))
        );
        let r = rate_limited(12);
        assert_eq!((r.status, r.code, r.fields["retry_after"].as_i64()), (429, "rate_limited", Some(12)));
        assert_eq!(r.headers, vec![("retry-after".to_string(), "12".to_string())]);
        let p = provider_rate_limited("linkup", 429, 7);
        assert_eq!(
            serde_json::from_str::<Value>(&p.body()).unwrap(),
            json!({ "error_code": "provider_rate_limited", "provider": "linkup", "status": 429, "retry_after": 7, "message": p.message })
        );
        assert_eq!(p.headers, vec![("retry-after".to_string(), "7".to_string())]);
        assert!(provider_timeout("brave").fields.get("status").is_none());
        let gate = eu_gate_refused("why".into(), None, true, false);
        assert!(gate.fields.get("provider").is_none());
        assert_eq!(gate.fields["eu_region_routing"], json!({ "gateway": true, "tenant": false }));
        assert_eq!(eu_gate_refused("why".into(), Some("brave"), false, true).fields["provider"], "brave");
        assert_eq!(upstream_content_type(503).fields["status"], 503);
    }
}
