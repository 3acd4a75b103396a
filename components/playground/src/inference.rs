//! The same-origin inference pass-through:
//! `POST /admin/v1/gw/{tenant_slug}/{gateway_slug}/v1/chat/completions`.
//!
//! The console's CSP allows `connect-src 'self'` and the gateway inference
//! endpoint (the simulator's, by default) is a private component, so the
//! Playground view streams its chat through this route. It is thin on
//! purpose: no admin session (the browser's `Authorization: Bearer myra_…`
//! gateway token is the credential, checked upstream), the JSON body and the
//! bearer forwarded unchanged to
//! `{inference_base_url}/{tenant}/{gateway}/v1/chat/completions`, and the
//! answer streamed back chunk by chunk with its status, `content-type` and
//! `x-trace-id` (a 401 `token_expired` / `invalid_token` body included).
//! Only `application/json` and `text/event-stream` answers are passed on
//! (by media-type essence): anything else (HTML, no content type, …) is a
//! 502 `upstream_content_type` envelope, so no upstream can put a page on
//! the console's origin.
//! This module is the pure part: the path and slug validation, the upstream
//! request, the content-type rule; the byte pump is in the wasm handler.

use crate::error::{self, ApiError};
use crate::util::BaseUrl;

/// The path prefix (below `/admin/v1`) of the pass-through.
pub const PREFIX: &str = "/gw/";
/// Longest tenant or gateway slug.
pub const MAX_SLUG_LEN: usize = 64;
/// Largest chat body forwarded (the rest of the API takes 16 KiB).
pub const MAX_CHAT_BODY: usize = 1024 * 1024;
pub const DEFAULT_BASE_URL: &str = "http://simulator.spin.internal/inference";

/// Request headers forwarded upstream (nothing else: no cookie, no origin).
pub const FORWARDED_REQUEST_HEADERS: &[&str] = &["authorization", "content-type", "accept"];
/// Response headers passed back to the browser.
pub const FORWARDED_RESPONSE_HEADERS: &[&str] = &["content-type", "x-trace-id", "retry-after"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub tenant_slug: String,
    pub gateway_slug: String,
}

/// 1-64 characters of `a-z A-Z 0-9 _ -` (no dots, no percent, no slash).
pub fn is_slug(raw: &str) -> bool {
    !raw.is_empty()
        && raw.len() <= MAX_SLUG_LEN
        && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Is this path (below `/admin/v1`) the pass-through's? `None`: another route.
/// `Some(Err)`: ours, but malformed (404), bad slugs (400) or not POST (405).
pub fn route(method: &str, path: &str) -> Option<Result<Target, ApiError>> {
    let rest = path.strip_prefix(PREFIX)?;
    let segments: Vec<&str> = rest.split('/').collect();
    let (tenant, gateway) = match segments.as_slice() {
        [tenant, gateway, "v1", "chat", "completions"] => (*tenant, *gateway),
        _ => return Some(Err(error::not_found())),
    };
    if !is_slug(tenant) || !is_slug(gateway) {
        return Some(Err(error::invalid_slug()));
    }
    if method != "POST" {
        return Some(Err(ApiError::method_not_allowed("POST")));
    }
    Some(Ok(Target { tenant_slug: tenant.to_string(), gateway_slug: gateway.to_string() }))
}

/// The upstream path (with the base URL's prefix).
pub fn upstream_path(base: &BaseUrl, target: &Target) -> String {
    base.path(&format!("/{}/{}/v1/chat/completions", target.tenant_slug, target.gateway_slug))
}

pub fn base_url(raw: Option<String>) -> Result<BaseUrl, ApiError> {
    let raw = raw.filter(|v| !v.trim().is_empty()).unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
    BaseUrl::parse(&raw)
        .filter(|b| !b.has_query())
        .ok_or_else(|| error::misconfigured("inference_base_url is not an http(s) URL"))
}

/// The 502 when the inference upstream cannot be reached (nothing streamed yet).
pub fn unreachable(timeout: bool) -> ApiError {
    if timeout {
        error::inference_timeout()
    } else {
        error::inference_unreachable()
    }
}

/// The media types an answer may have to be passed on.
pub const PASSED_MEDIA_TYPES: &[&str] = &["application/json", "text/event-stream"];

/// Passes an upstream answer whose one `content-type` has an allowed essence
/// (parameters such as `charset` are fine); anything else is the typed 502.
pub fn check_content_type(values: &[Vec<u8>], upstream_status: u16) -> Result<(), ApiError> {
    let essence = match values {
        [one] => std::str::from_utf8(one).ok().map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase()),
        _ => None,
    };
    match essence {
        Some(e) if PASSED_MEDIA_TYPES.contains(&e.as_str()) => Ok(()),
        _ => Err(error::upstream_content_type(upstream_status)),
    }
}

/// The upstream body, relayed as text (the kit's pump writes `String`s). A
/// chunk boundary may split a UTF-8 character: its first bytes wait for the
/// next chunk. Bytes that are not UTF-8 at all (never in a JSON or SSE body)
/// become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    /// Appends the text `chunk` completes to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut String) {
        self.pending.extend_from_slice(chunk);
        let mut rest: &[u8] = &self.pending;
        while let Err(e) = std::str::from_utf8(rest) {
            let (valid, after) = rest.split_at(e.valid_up_to());
            out.push_str(std::str::from_utf8(valid).unwrap_or_default());
            match e.error_len() {
                // An incomplete character at the end: keep it for the next chunk.
                None => {
                    self.pending = after.to_vec();
                    return;
                }
                Some(n) => {
                    out.push(char::REPLACEMENT_CHARACTER);
                    rest = &after[n..];
                }
            }
        }
        out.push_str(std::str::from_utf8(rest).unwrap_or_default());
        self.pending.clear();
    }

    /// What is left when the body ended (a character cut short), as U+FFFD.
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_relays_whole_characters_across_chunk_boundaries() {
        let body = "data: {\"delta\":\"fjord ÆØÅ — 🦀\"}\n\n".as_bytes();
        for split in 0..=body.len() {
            let mut carry = Utf8Carry::default();
            let mut out = String::new();
            carry.push(&body[..split], &mut out);
            carry.push(&body[split..], &mut out);
            assert_eq!(out.as_bytes(), body, "split at {split}");
            assert_eq!(carry.finish(), "");
        }
        // Byte by byte, too.
        let mut carry = Utf8Carry::default();
        let mut out = String::new();
        for b in body {
            carry.push(std::slice::from_ref(b), &mut out);
        }
        assert_eq!(out.as_bytes(), body);
        // Not UTF-8 at all: replaced, and the rest still flows; a cut-short end is replaced too.
        let mut carry = Utf8Carry::default();
        let mut out = String::new();
        carry.push(b"a\xffb\xf0\x9f", &mut out);
        assert_eq!(out, "a\u{FFFD}b");
        assert_eq!(carry.finish(), "\u{FFFD}");
    }

    #[test]
    fn only_json_and_event_streams_are_passed_on() {
        let ct = |v: &str| vec![v.as_bytes().to_vec()];
        for ok in [
            "application/json",
            "text/event-stream",
            "Application/JSON; charset=utf-8",
            "text/event-stream;charset=UTF-8",
        ] {
            assert!(check_content_type(&ct(ok), 200).is_ok(), "{ok}");
        }
        let none: Vec<Vec<u8>> = Vec::new();
        let two = vec![b"application/json".to_vec(), b"text/html".to_vec()];
        for bad in [
            ct("text/html"),
            ct("text/html; charset=utf-8"),
            ct("application/json+html"),
            ct("application/jsonx"),
            ct("text/plain"),
            ct(""),
            vec![b"\xffapplication/json".to_vec()],
            none,
            two,
        ] {
            let e = check_content_type(&bad, 401).unwrap_err();
            assert_eq!((e.status, e.code), (502, "upstream_content_type"), "{bad:?}");
            assert_eq!(e.fields["status"], 401);
        }
    }

    #[test]
    fn routes_only_its_prefix() {
        assert_eq!(route("POST", "/auth/login"), None);
        assert_eq!(route("POST", "/gateways"), None);
        assert_eq!(route("POST", "/gwx/a/b/v1/chat/completions"), None);
        let t = route("POST", "/gw/acme/main/v1/chat/completions").unwrap().unwrap();
        assert_eq!(t, Target { tenant_slug: "acme".into(), gateway_slug: "main".into() });
        let t = route("POST", "/gw/euco/eu-linkup/v1/chat/completions").unwrap().unwrap();
        assert_eq!(t.gateway_slug, "eu-linkup");
    }

    #[test]
    fn malformed_paths_and_methods() {
        for bad in [
            "/gw/",
            "/gw/acme",
            "/gw/acme/main",
            "/gw/acme/main/v1/chat",
            "/gw/acme/main/v1/chat/completions/x",
            "/gw/acme/main/v2/chat/completions",
        ] {
            assert_eq!(route("POST", bad).unwrap().unwrap_err().code, "not_found", "{bad}");
        }
        let e = route("GET", "/gw/acme/main/v1/chat/completions").unwrap().unwrap_err();
        assert_eq!((e.status, e.code), (405, "method_not_allowed"));
        assert_eq!(e.headers, vec![("allow".into(), "POST".into())]);
    }

    #[test]
    fn slugs_are_strictly_shaped() {
        assert!(is_slug("acme") && is_slug("eu-linkup") && is_slug("a_B-9") && is_slug(&"a".repeat(64)));
        for bad in ["", "..", ".", "a.b", "a%2Fb", "a%20", "a b", "é", "a?b", "a#b", "a:b", &"a".repeat(65)] {
            assert!(!is_slug(bad), "{bad:?}");
            let path = format!("/gw/{bad}/main/v1/chat/completions");
            let code = route("POST", &path).unwrap().unwrap_err().code;
            assert!(code == "invalid_slug" || code == "not_found", "{bad:?}: {code}");
            let path = format!("/gw/acme/{bad}/v1/chat/completions");
            let code = route("POST", &path).unwrap().unwrap_err().code;
            assert!(code == "invalid_slug" || code == "not_found", "{bad:?}: {code}");
        }
        let e = route("POST", "/gw/a.b/main/v1/chat/completions").unwrap().unwrap_err();
        assert_eq!((e.status, e.code), (400, "invalid_slug"));
    }

    #[test]
    fn upstream_url_keeps_the_base_prefix() {
        let t = Target { tenant_slug: "acme".into(), gateway_slug: "main".into() };
        let base = base_url(None).unwrap();
        assert_eq!(base.authority, "simulator.spin.internal");
        assert_eq!(upstream_path(&base, &t), "/inference/acme/main/v1/chat/completions");
        let base = base_url(Some("http://127.0.0.1:9999/".into())).unwrap();
        assert_eq!(upstream_path(&base, &t), "/acme/main/v1/chat/completions");
        assert_eq!(base_url(Some("ftp://x".into())).unwrap_err().code, "server_misconfigured");
    }
}
