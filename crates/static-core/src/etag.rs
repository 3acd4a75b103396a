//! Entity tags and `If-None-Match` (RFC 9110 §8.8.3, §13.1.2).

use std::io::{self, Read};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use xxhash_rust::xxh3::Xxh3;

use crate::encoding::Encoding;

/// Read size when hashing a file: a few WASI reads for a typical page.
const HASH_CHUNK: usize = 16 * 1024;

/// Strong ETag of the identity bytes: `"` + base64url(XXH3-128) + `"`.
///
/// The tag is the content's identity, so it is recomputed from the bytes on every
/// request: it must not depend on modification times, which `spin up` resets when it
/// copies the files at start-up. XXH3 (not SHA-256) because it runs at memory speed in
/// wasm; a forged collision gains nothing, as whoever can write the files serves them.
pub fn content_etag(bytes: &[u8]) -> String {
    let mut hasher = Xxh3::new();
    hasher.update(bytes);
    etag_of(&hasher)
}

/// [`content_etag`] of the first `len` bytes of `reader`, read in chunks (no copy of
/// the whole file in memory). A reader shorter than `len` is an error: the file
/// changed under us, and a tag for bytes we will not send must not be made.
pub fn content_etag_of(reader: impl Read, len: u64) -> io::Result<String> {
    let mut hasher = Xxh3::new();
    let mut reader = reader.take(len);
    let mut buffer = vec![0u8; HASH_CHUNK.min(usize::try_from(len).unwrap_or(HASH_CHUNK)).max(1)];
    let mut seen = 0u64;
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buffer[..n]);
                seen += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if seen != len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank while hashing"));
    }
    Ok(etag_of(&hasher))
}

fn etag_of(hasher: &Xxh3) -> String {
    let digest = hasher.digest128().to_be_bytes();
    format!("\"{}\"", URL_SAFE_NO_PAD.encode(digest))
}

/// ETag of one coded representation: `"abc"` -> `"abc-br"`. Each coding is a
/// different representation, so it must not share the identity's strong tag.
pub fn variant_etag(base: &str, encoding: Encoding) -> String {
    let suffix = encoding.etag_suffix();
    match base.strip_suffix('"') {
        Some(open) if !suffix.is_empty() => format!("{open}{suffix}\""),
        _ => base.to_owned(),
    }
}

/// True when `etag` is a well-formed strong tag whose content we could have made:
/// guards headers built from a sidecar someone may have edited.
pub fn is_plausible_etag(etag: &str) -> bool {
    let Some(inner) = etag.strip_prefix('"').and_then(|e| e.strip_suffix('"')) else {
        return false;
    };
    !inner.is_empty() && inner.len() <= 64 && inner.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Does an `If-None-Match` field value match the current representation's tag?
///
/// Weak comparison (W/ ignored on both sides), comma-separated lists, `*` matches
/// any current representation. A malformed value matches nothing, which only ever
/// costs a full 200.
pub fn if_none_match_matches(header: &str, current: &str) -> bool {
    let current = opaque_tag(current);
    let header = header.trim_matches(is_ows);
    if header == "*" {
        return true;
    }
    let bytes = header.as_bytes();
    let mut i = 0;
    let mut matched = false;
    loop {
        while i < bytes.len() && (bytes[i] == b',' || is_ows(bytes[i] as char)) {
            i += 1;
        }
        if i >= bytes.len() {
            return matched;
        }
        if bytes[i..].starts_with(b"W/") {
            i += 2;
        }
        if bytes.get(i) != Some(&b'"') {
            return false;
        }
        let start = i;
        let Some(len) = bytes[i + 1..].iter().position(|&b| b == b'"') else {
            return false;
        };
        let end = i + 1 + len + 1;
        let tag = &header[start..end];
        if !tag.bytes().all(|b| b == 0x21 || b >= 0x23 && b != 0x7f || b == b'"') {
            return false;
        }
        matched |= tag == current;
        i = end;
        while i < bytes.len() && is_ows(bytes[i] as char) {
            i += 1;
        }
        if i < bytes.len() && bytes[i] != b',' {
            return false;
        }
    }
}

fn opaque_tag(etag: &str) -> &str {
    etag.strip_prefix("W/").unwrap_or(etag)
}

fn is_ows(c: char) -> bool {
    c == ' ' || c == '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "\"abc123\"";

    #[test]
    fn content_etag_is_strong_quoted_and_stable() {
        let tag = content_etag(b"hello");
        assert!(tag.starts_with('"') && tag.ends_with('"'));
        assert!(!tag.starts_with("W/"));
        assert_eq!(tag.len(), 2 + 22);
        assert_eq!(tag, content_etag(b"hello"));
        assert_ne!(tag, content_etag(b"hello!"));
        assert!(is_plausible_etag(&tag));
    }

    #[test]
    fn content_etag_is_xxh3_128_of_the_bytes() {
        // The published XXH3-128 of the empty input, big-endian.
        let empty = 0x99aa06d3014798d86001c324468d497f_u128.to_be_bytes();
        assert_eq!(content_etag(b""), format!("\"{}\"", URL_SAFE_NO_PAD.encode(empty)));
    }

    #[test]
    fn streamed_tag_equals_the_in_memory_tag() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for len in [0, 1, 16_383, 16_384, 16_385, 100_000] {
            assert_eq!(content_etag_of(&bytes[..], len as u64).unwrap(), content_etag(&bytes[..len]), "{len}");
        }
        // Only the first `len` bytes count.
        assert_eq!(content_etag_of(&bytes[..], 10).unwrap(), content_etag(&bytes[..10]));
        // A reader that ends early is an error, not a tag of fewer bytes.
        let error = content_etag_of(&bytes[..5], 6).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn variants_have_distinct_tags() {
        assert_eq!(variant_etag(TAG, Encoding::Identity), TAG);
        assert_eq!(variant_etag(TAG, Encoding::Brotli), "\"abc123-br\"");
        assert_eq!(variant_etag(TAG, Encoding::Gzip), "\"abc123-gz\"");
    }

    #[test]
    fn implausible_etags() {
        for tag in ["", "\"\"", "abc", "W/\"abc\"", "\"a b\"", "\"a\r\nx: y\"", "\"a\"\""] {
            assert!(!is_plausible_etag(tag), "{tag:?}");
        }
    }

    #[test]
    fn single_tag() {
        assert!(if_none_match_matches(TAG, TAG));
        assert!(!if_none_match_matches("\"other\"", TAG));
        assert!(!if_none_match_matches("abc123", TAG), "unquoted never matches");
    }

    #[test]
    fn lists() {
        assert!(if_none_match_matches("\"x\", \"abc123\"", TAG));
        assert!(if_none_match_matches("\"abc123\",\"x\"", TAG));
        assert!(if_none_match_matches(" \"x\" ,\t\"y\" , \"abc123\" ", TAG));
        assert!(!if_none_match_matches("\"x\", \"y\"", TAG));
        assert!(if_none_match_matches(",, \"abc123\" ,", TAG));
    }

    #[test]
    fn weak_comparison() {
        assert!(if_none_match_matches("W/\"abc123\"", TAG));
        assert!(if_none_match_matches("\"x\", W/\"abc123\"", TAG));
        assert!(if_none_match_matches("\"abc123\"", "W/\"abc123\""));
        assert!(!if_none_match_matches("w/\"abc123\"", TAG), "W/ is case-sensitive");
    }

    #[test]
    fn star() {
        assert!(if_none_match_matches("*", TAG));
        assert!(if_none_match_matches(" * ", TAG));
        assert!(!if_none_match_matches("\"x\", *", TAG), "* is not a list member");
    }

    #[test]
    fn commas_inside_tags_are_not_separators() {
        assert!(if_none_match_matches("\"a,b\", \"abc123\"", TAG));
        assert!(!if_none_match_matches("\"abc123,x\"", TAG));
    }

    #[test]
    fn coded_variant_tag_matches_only_that_variant() {
        let br = variant_etag(TAG, Encoding::Brotli);
        assert!(if_none_match_matches(&br, &br));
        assert!(!if_none_match_matches(&br, TAG));
        assert!(!if_none_match_matches(&br, &variant_etag(TAG, Encoding::Gzip)));
    }

    #[test]
    fn malformed_matches_nothing() {
        for header in ["", "\"abc123", "abc123\"", "\"abc123\" junk", "W/", "W/abc", "\"x\" \"abc123\""] {
            assert!(!if_none_match_matches(header, TAG), "{header:?}");
        }
    }
}
