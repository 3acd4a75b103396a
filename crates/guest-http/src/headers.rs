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

/// The `content-length` a whole response of `len` bytes adds: none if the
/// list has one already, or for a status that has no body (1xx, 204, 304).
pub fn content_length<N: AsRef<str>, V>(status: u16, header_list: &[(N, V)], len: usize) -> Option<String> {
    let no_body = status < 200 || status == 204 || status == 304;
    let has = header_list.iter().any(|(n, _)| n.as_ref().eq_ignore_ascii_case("content-length"));
    (!no_body && !has).then(|| len.to_string())
}

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
    fn a_whole_body_gets_its_length_once_and_only_where_a_body_may_be() {
        let json: &[(&str, &str)] = &JSON;
        assert_eq!(content_length(200, json, 139).as_deref(), Some("139"));
        assert_eq!(content_length(404, json, 0).as_deref(), Some("0"));
        assert_eq!(content_length(200, &[("Content-Length", "7")], 7), None, "the caller's own stays the only one");
        for no_body in [101, 204, 304] {
            assert_eq!(content_length(no_body, json, 0), None, "{no_body}");
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
