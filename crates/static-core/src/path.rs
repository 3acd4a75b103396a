//! Request path -> safe relative file path.
//!
//! The raw (still percent-encoded) request path is decoded exactly once and then
//! checked against an allow-list. Anything doubtful is refused; the caller answers
//! every refusal with the same 404, so a refusal never tells an attacker why.

use std::fmt;

/// Longest raw request path we look at, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;

/// A request path that passed every check: relative, `/`-separated, ASCII,
/// no empty, `.`, `..` or hidden segments. Safe to join onto a root directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafePath(String);

impl SafePath {
    /// The relative path, e.g. `index.html` or `x/y.css` (never starts with `/`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SafePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a path was refused. Only for tests and logs: the response is always a plain 404.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathRefusal {
    Empty,
    TooLong,
    NotAbsolute,
    DoubleSlash,
    /// Raw bytes outside visible ASCII (controls, space, non-ASCII), or `?`/`#`.
    BadRawByte,
    Backslash,
    BadPercentEncoding,
    /// `%2f` or `%5c`: a separator smuggled past routing.
    EncodedSeparator,
    /// `%25`: would only be useful to someone hoping for a second decode.
    EncodedPercent,
    ControlChar,
    InvalidUtf8,
    /// Valid UTF-8 but not ASCII: asset names are ASCII, and refusing the rest
    /// removes look-alike dots/slashes and normalisation tricks wholesale.
    NonAscii,
    EmptySegment,
    DotSegment,
    HiddenSegment,
    /// A segment ending in `.` (Windows strips it: `index.html.` == `index.html`).
    TrailingDot,
    /// `:` anywhere: drive letters (`C:`), NTFS streams (`a::$DATA`), schemes.
    Colon,
    /// Characters that are legal in URLs but never in our asset names.
    DisallowedChar,
    /// A path naming a directory (trailing `/`), other than the site root.
    Directory,
}

/// Checks a raw request path (as in `spin-path-info`, percent-encoded, no query)
/// and returns the file it names. `/` names `index.html`.
pub fn sanitize_request_path(raw: &str) -> Result<SafePath, PathRefusal> {
    let raw = raw.as_bytes();
    if raw.is_empty() {
        return Err(PathRefusal::Empty);
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(PathRefusal::TooLong);
    }
    if raw[0] != b'/' {
        return Err(PathRefusal::NotAbsolute);
    }
    if raw.starts_with(b"//") {
        return Err(PathRefusal::DoubleSlash);
    }
    if raw == b"/" {
        return Ok(SafePath("index.html".to_owned()));
    }
    if raw.ends_with(b"/") {
        return Err(PathRefusal::Directory);
    }

    let mut decoded = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let byte = raw[i];
        match byte {
            b'\\' => return Err(PathRefusal::Backslash),
            b'?' | b'#' => return Err(PathRefusal::BadRawByte),
            0x21..=0x7e if byte != b'%' => {
                decoded.push(byte);
                i += 1;
            }
            b'%' => {
                let (Some(&hi), Some(&lo)) = (raw.get(i + 1), raw.get(i + 2)) else {
                    return Err(PathRefusal::BadPercentEncoding);
                };
                let (Some(hi), Some(lo)) = (hex_value(hi), hex_value(lo)) else {
                    return Err(PathRefusal::BadPercentEncoding);
                };
                let value = hi << 4 | lo;
                match value {
                    b'/' | b'\\' => return Err(PathRefusal::EncodedSeparator),
                    b'%' => return Err(PathRefusal::EncodedPercent),
                    0x00..=0x1f | 0x7f => return Err(PathRefusal::ControlChar),
                    _ => decoded.push(value),
                }
                i += 3;
            }
            0x00..=0x1f | 0x7f => return Err(PathRefusal::ControlChar),
            _ => return Err(PathRefusal::BadRawByte),
        }
    }

    // std's UTF-8 check rejects overlong forms (%c0%ae), surrogates and truncation.
    let decoded = String::from_utf8(decoded).map_err(|_| PathRefusal::InvalidUtf8)?;
    if !decoded.is_ascii() {
        return Err(PathRefusal::NonAscii);
    }

    // decoded starts with '/' (raw did, and '/' is never produced by decoding).
    let relative = &decoded[1..];
    for segment in relative.split('/') {
        check_segment(segment)?;
    }
    Ok(SafePath(relative.to_owned()))
}

fn check_segment(segment: &str) -> Result<(), PathRefusal> {
    if segment.is_empty() {
        return Err(PathRefusal::EmptySegment);
    }
    if segment == "." || segment == ".." {
        return Err(PathRefusal::DotSegment);
    }
    if segment.starts_with('.') {
        return Err(PathRefusal::HiddenSegment);
    }
    if segment.ends_with('.') {
        return Err(PathRefusal::TrailingDot);
    }
    for byte in segment.bytes() {
        match byte {
            b':' => return Err(PathRefusal::Colon),
            b'\\' => return Err(PathRefusal::Backslash),
            0x00..=0x1f | 0x7f => return Err(PathRefusal::ControlChar),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => {}
            b'-' | b'_' | b'.' | b'~' | b'+' | b'@' | b',' | b'=' | b'!' | b'(' | b')' => {}
            _ => return Err(PathRefusal::DisallowedChar),
        }
    }
    Ok(())
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Attack paths that must all be refused (404). Public so the component tests
/// can replay the same corpus through the real .wasm: every entry is a valid
/// origin-form request target (starts with `/`, no query or fragment, only bytes
/// an HTTP/1.1 server accepts in a path), so it can be sent verbatim.
pub fn traversal_corpus() -> Vec<String> {
    let mut corpus: Vec<String> = TRAVERSAL_CORPUS.iter().map(|s| (*s).to_owned()).collect();
    corpus.push(format!("/{}", "a".repeat(MAX_PATH_BYTES)));
    corpus.push(format!("/{}.css", "a/".repeat(600)));
    corpus
}

const TRAVERSAL_CORPUS: &[&str] = &[
    // plain and encoded dot-dot
    "/../etc/passwd",
    "/../../../../etc/passwd",
    "/x/../../etc/passwd",
    "/..",
    "/x/..",
    "/%2e%2e/etc/passwd",
    "/%2E%2E/%2E%2E/etc/passwd",
    "/.%2e/etc/passwd",
    "/%2e./etc/passwd",
    "/x/%2e%2e/%2e%2e/etc/passwd",
    // dot segments
    "/./index.html",
    "/x/./y.css",
    "/%2e/index.html",
    // encoded separators
    "/..%2fetc%2fpasswd",
    "/..%2Fetc%2Fpasswd",
    "/x%2f..%2f..%2fetc%2fpasswd",
    "/..%5cetc%5cpasswd",
    "/..%5C..%5Cwindows%5Cwin.ini",
    // backslashes
    "/..\\..\\etc\\passwd",
    "/x\\y.css",
    // overlong / invalid UTF-8
    "/%c0%ae%c0%ae/etc/passwd",
    "/%c0%af..%c0%afetc%c0%afpasswd",
    "/%e0%80%ae%e0%80%ae/etc/passwd",
    "/%c1%9c..%c1%9cetc",
    "/%f0%80%80%ae%f0%80%80%ae/etc/passwd",
    "/%ed%a0%80.css",
    "/%ff%fe.html",
    "/%c0",
    // unicode look-alikes of '.' and '/'
    "/%ef%bc%8e%ef%bc%8e/etc/passwd",
    "/..%e2%88%95etc%e2%88%95passwd",
    // double encoding must never decode twice
    "/%252e%252e/etc/passwd",
    "/%252e%252e%252fetc%252fpasswd",
    "/%25%32%65%25%32%65/etc/passwd",
    // NUL and control characters
    "/index.html%00.png",
    "/index.html%00",
    "/%0d%0aSet-Cookie:%20x=1",
    "/index%09.html",
    "/index.html%7f",
    // malformed percent-encoding
    "/%",
    "/%2",
    "/%zz",
    "/%%32%65",
    // leading double slash / protocol-relative
    "//etc/passwd",
    "//evil.example/x.js",
    "///etc/passwd",
    // empty segments
    "/x//y.css",
    // hidden segments
    "/.env",
    "/.git/config",
    "/x/.htaccess",
    "/%2eenv",
    "/.well-known/../../etc/passwd",
    // Windows absolute paths, drive letters, streams, trailing dots
    "/C:/Windows/win.ini",
    "/c:%5cwindows%5cwin.ini",
    "/C%3a/Windows/win.ini",
    "/index.html::$DATA",
    "/index.html.",
    "/\\\\server\\share",
    // directories other than the root
    "/x/",
    "/x/y/",
];

/// Refused too, but no HTTP server would hand them to the component as a path.
#[cfg(test)]
const NON_WIRE_CORPUS: &[&str] = &[
    "",
    "index.html",
    "../index.html",
    "http://evil.example/",
    "/index.html?x=1",
    "/index.html#frag",
    "/a b.css",
    "/<script>.html",
    "/index.html\0",
    "/caf\u{e9}.css",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(raw: &str) -> String {
        match sanitize_request_path(raw) {
            Ok(p) => p.as_str().to_owned(),
            Err(e) => panic!("{raw:?} refused: {e:?}"),
        }
    }

    fn refused(raw: &str) -> PathRefusal {
        match sanitize_request_path(raw) {
            Ok(p) => panic!("{raw:?} accepted as {p:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn root_names_index() {
        assert_eq!(ok("/"), "index.html");
    }

    #[test]
    fn plain_paths_are_accepted() {
        assert_eq!(ok("/index.html"), "index.html");
        assert_eq!(ok("/x/y.css"), "x/y.css");
        assert_eq!(ok("/app.min.js"), "app.min.js");
        assert_eq!(ok("/fonts/Inter-Bold_v2~1.woff2"), "fonts/Inter-Bold_v2~1.woff2");
    }

    #[test]
    fn harmless_percent_encoding_is_decoded_once() {
        assert_eq!(ok("/x/y%2ecss"), "x/y.css");
        assert_eq!(ok("/%61pp.js"), "app.js");
        assert_eq!(ok("/a%2Bb.txt"), "a+b.txt");
    }

    #[test]
    fn every_corpus_entry_is_refused() {
        let corpus = traversal_corpus();
        assert!(corpus.len() >= 30, "corpus has {}", corpus.len());
        for raw in corpus.iter().map(String::as_str).chain(NON_WIRE_CORPUS.iter().copied()) {
            assert!(sanitize_request_path(raw).is_err(), "{raw:?} was accepted");
        }
    }

    #[test]
    fn corpus_entries_can_be_sent_verbatim() {
        // The bytes http::Uri accepts in a path (WHATWG path state), minus '?' and '#'.
        let on_the_wire = |b: u8| matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x40..=0x5F | 0x61..=0x7A | 0x7C | 0x7E);
        for raw in traversal_corpus() {
            assert!(raw.starts_with('/'), "{raw:?}");
            assert!(raw.bytes().all(on_the_wire), "{raw:?}");
        }
    }

    #[test]
    fn refusal_reasons() {
        assert_eq!(refused("/../x"), PathRefusal::DotSegment);
        assert_eq!(refused("/%2e%2e/x"), PathRefusal::DotSegment);
        assert_eq!(refused("/./x"), PathRefusal::DotSegment);
        assert_eq!(refused("/a%2fb"), PathRefusal::EncodedSeparator);
        assert_eq!(refused("/a%5Cb"), PathRefusal::EncodedSeparator);
        assert_eq!(refused("/a\\b"), PathRefusal::Backslash);
        assert_eq!(refused("/a%00"), PathRefusal::ControlChar);
        assert_eq!(refused("/a%0a"), PathRefusal::ControlChar);
        assert_eq!(refused("/%c0%ae"), PathRefusal::InvalidUtf8);
        assert_eq!(refused("/%e0%80%ae"), PathRefusal::InvalidUtf8);
        assert_eq!(refused("/%252e%252e"), PathRefusal::EncodedPercent);
        assert_eq!(refused("//x"), PathRefusal::DoubleSlash);
        assert_eq!(refused("/.env"), PathRefusal::HiddenSegment);
        assert_eq!(refused("/C:/x"), PathRefusal::Colon);
        assert_eq!(refused("/a//b"), PathRefusal::EmptySegment);
        assert_eq!(refused("/x/"), PathRefusal::Directory);
        assert_eq!(refused("/%e2%80%ae.html"), PathRefusal::NonAscii);
        assert_eq!(refused("/a b"), PathRefusal::BadRawByte);
        assert_eq!(refused("/a%20b"), PathRefusal::DisallowedChar);
        assert_eq!(refused("/%zz"), PathRefusal::BadPercentEncoding);
        assert_eq!(refused("/index.html."), PathRefusal::TrailingDot);
        assert_eq!(refused(""), PathRefusal::Empty);
        assert_eq!(refused("x"), PathRefusal::NotAbsolute);
    }

    #[test]
    fn length_limit_is_on_raw_bytes() {
        let longest = format!("/{}", "a".repeat(MAX_PATH_BYTES - 1));
        assert!(sanitize_request_path(&longest).is_ok());
        let too_long = format!("/{}", "a".repeat(MAX_PATH_BYTES));
        assert_eq!(refused(&too_long), PathRefusal::TooLong);
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        fn assert_safe(p: &SafePath) {
            let s = p.as_str();
            assert!(!s.starts_with('/'));
            assert!(s.is_ascii());
            for segment in s.split('/') {
                assert!(!segment.is_empty() && segment != "." && segment != "..");
                assert!(!segment.starts_with('.'));
            }
            assert!(!s.contains(['\\', ':', '%', '\0']));
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]

            #[test]
            fn never_panics_on_any_string(raw in any::<String>()) {
                if let Ok(p) = sanitize_request_path(&raw) { assert_safe(&p); }
            }

            #[test]
            fn path_like_input_never_yields_traversal(
                raw in "(/|%2[fF]|%2[eE]|\\.|\\.\\.|%25|%[cC]0%[aA][eE]|\\\\|a|b|%00|:)*"
            ) {
                if let Ok(p) = sanitize_request_path(&raw) { assert_safe(&p); }
            }
        }
    }
}
