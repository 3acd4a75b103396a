//! The project's standard response headers, and the one reading of the
//! request headers every component shares (content type, origin).

/// Every JSON answer of the APIs: typed, never cached, never sniffed.
pub const JSON: [(&str, &str); 3] = [
    ("content-type", "application/json; charset=utf-8"),
    ("cache-control", "no-store"),
    ("x-content-type-options", "nosniff"),
];

/// Every event stream: never cached, never sniffed, and a hint to nginx-style
/// reverse proxies not to buffer it (a buffered stream arrives all at the end).
pub const SSE: [(&str, &str); 4] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
    ("x-content-type-options", "nosniff"),
];

/// Whether a `Content-Type` is JSON: its media-type essence is exactly
/// `application/json` (parameters aside; `application/jsonx` is not).
pub fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// `scheme://authority` of an absolute URL, lowercased: what a browser
/// sends as `Origin` for a page at that URL.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if scheme.is_empty() || authority.is_empty() {
        return None;
    }
    Some(format!("{}://{}", scheme.to_ascii_lowercase(), authority.to_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_the_essence_not_a_prefix() {
        for yes in ["application/json", "Application/JSON; charset=utf-8", " application/json ;x=y"] {
            assert!(is_json(yes), "{yes}");
        }
        for no in ["application/jsonx", "application/json-seq", "text/json", "", "application/x-www-form-urlencoded"] {
            assert!(!is_json(no), "{no}");
        }
    }

    #[test]
    fn origins_are_scheme_and_authority_lowercased() {
        assert_eq!(origin_of("HTTP://Example.COM:3000/api/x?y").as_deref(), Some("http://example.com:3000"));
        assert_eq!(origin_of("https://a.test").as_deref(), Some("https://a.test"));
        assert_eq!(origin_of("nonsense"), None);
        assert_eq!(origin_of("http:///x"), None);
    }
}
