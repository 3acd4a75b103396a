//! Entity tags and `If-None-Match` (RFC 9110 §8.8.3, §13.1.2).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::encoding::Encoding;
use crate::sidecar::SourceStamp;

/// Strong ETag of the identity bytes: `"` + base64url(first 16 bytes of SHA-256) + `"`.
pub fn content_etag(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    format!("\"{}\"", URL_SAFE_NO_PAD.encode(&digest[..16]))
}

/// ETag from file metadata, used when no fresh sidecar vouches for the content:
/// costs a stat, never a read. Its shape (`"m-…"`) can't collide with a content tag.
pub fn metadata_etag(stamp: &SourceStamp) -> String {
    format!(
        "\"m-{:x}-{:x}-{:x}\"",
        stamp.size, stamp.mtime_secs, stamp.mtime_nanos
    )
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
    !inner.is_empty()
        && inner.len() <= 64
        && inner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
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
        if !tag
            .bytes()
            .all(|b| b == 0x21 || b >= 0x23 && b != 0x7f || b == b'"')
        {
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
    fn metadata_etag_changes_with_size_and_mtime() {
        let stamp = SourceStamp {
            size: 10,
            mtime_secs: 1_700_000_000,
            mtime_nanos: 5,
        };
        let tag = metadata_etag(&stamp);
        assert!(is_plausible_etag(&tag), "{tag}");
        assert_ne!(tag, metadata_etag(&SourceStamp { size: 11, ..stamp }));
        assert_ne!(
            tag,
            metadata_etag(&SourceStamp {
                mtime_nanos: 6,
                ..stamp
            })
        );
        assert_ne!(
            tag,
            metadata_etag(&SourceStamp {
                mtime_secs: 1,
                ..stamp
            })
        );
    }

    #[test]
    fn variants_have_distinct_tags() {
        assert_eq!(variant_etag(TAG, Encoding::Identity), TAG);
        assert_eq!(variant_etag(TAG, Encoding::Brotli), "\"abc123-br\"");
        assert_eq!(variant_etag(TAG, Encoding::Gzip), "\"abc123-gz\"");
    }

    #[test]
    fn implausible_etags() {
        for tag in [
            "",
            "\"\"",
            "abc",
            "W/\"abc\"",
            "\"a b\"",
            "\"a\r\nx: y\"",
            "\"a\"\"",
        ] {
            assert!(!is_plausible_etag(tag), "{tag:?}");
        }
    }

    #[test]
    fn single_tag() {
        assert!(if_none_match_matches(TAG, TAG));
        assert!(!if_none_match_matches("\"other\"", TAG));
        assert!(
            !if_none_match_matches("abc123", TAG),
            "unquoted never matches"
        );
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
        assert!(
            !if_none_match_matches("w/\"abc123\"", TAG),
            "W/ is case-sensitive"
        );
    }

    #[test]
    fn star() {
        assert!(if_none_match_matches("*", TAG));
        assert!(if_none_match_matches(" * ", TAG));
        assert!(
            !if_none_match_matches("\"x\", *", TAG),
            "* is not a list member"
        );
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
        assert!(!if_none_match_matches(
            &br,
            &variant_etag(TAG, Encoding::Gzip)
        ));
    }

    #[test]
    fn malformed_matches_nothing() {
        for header in [
            "",
            "\"abc123",
            "abc123\"",
            "\"abc123\" junk",
            "W/",
            "W/abc",
            "\"x\" \"abc123\"",
        ] {
            assert!(!if_none_match_matches(header, TAG), "{header:?}");
        }
    }
}
