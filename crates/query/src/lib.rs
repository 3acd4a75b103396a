//! Query strings for API inputs, decoded strictly.
//!
//! `form_urlencoded` (what spin-sdk uses) decodes lossily: a broken `%zz` stays
//! literal and invalid UTF-8 becomes U+FFFD. For values that are validated and
//! then placed into upstream URLs or SQL parameters we want the opposite: an
//! input that does not decode cleanly is refused. It is the project's one
//! percent codec: debug-api, playground, the simulator and the test probe use it.

/// Decodes one `application/x-www-form-urlencoded` value (`+` is a space).
/// `None` for a malformed escape or bytes that are not UTF-8.
pub fn percent_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hi = bytes.get(i + 1).and_then(|c| (*c as char).to_digit(16))?;
                let lo = bytes.get(i + 2).and_then(|c| (*c as char).to_digit(16))?;
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A query parameter's raw values, in order (`name` compared literally).
pub fn query_values<'a>(query: &'a str, name: &str) -> Vec<&'a str> {
    query
        .split('&')
        .filter_map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (k == name).then_some(v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_strictly() {
        assert_eq!(percent_decode("a+b%20c%2B").as_deref(), Some("a b c+"));
        assert_eq!(percent_decode("caf%C3%A9").as_deref(), Some("café"));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
    }

    #[test]
    fn encodes_all_but_unreserved_and_round_trips() {
        assert_eq!(percent_encode("a b/&é"), "a%20b%2F%26%C3%A9");
        for text in ["plain", "a b+c", "100%", "é/?#&=", ""] {
            assert_eq!(percent_decode(&percent_encode(text)).as_deref(), Some(text));
        }
    }

    #[test]
    fn finds_every_raw_value_of_a_name() {
        assert_eq!(query_values("a=1&b=2&a=3&ab=4&a", "a"), vec!["1", "3", ""]);
        assert!(query_values("", "a").is_empty());
    }
}
