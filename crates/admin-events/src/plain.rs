//! The hot path's reading of an event's data when it holds no backslash and
//! no line break (nearly every event): a single forward pass that checks the
//! JSON grammar, the nesting limit and the number range exactly as decoding
//! it with serde_json does, and keeps the top-level `session_id` and
//! `timestamp` strings. Without escapes a string is its bytes between the
//! quotes, so nothing is decoded or copied.

use std::borrow::Cow;

use crate::{AdminEventError, Probe};

/// serde_json's recursion limit: the top-level object counts, so 127 levels
/// of arrays and objects read and the 128th fails.
const MAX_DEPTH: usize = 127;

/// `data` read as one JSON object; it must hold no `\`, LF or CR.
pub(crate) fn probe(data: &str) -> Result<Probe<'_>, AdminEventError> {
    debug_assert!(memchr::memchr3(b'\\', b'\n', b'\r', data.as_bytes()).is_none());
    let mut scan = Scan { bytes: data.as_bytes(), at: 0, text: data };
    let probe = scan.top().ok_or(AdminEventError::MalformedSseData)?;
    Ok(probe)
}

struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
    text: &'a str,
}

impl<'a> Scan<'a> {
    fn top(&mut self) -> Option<Probe<'a>> {
        let mut probe = Probe { session_id: None, timestamp: None };
        self.skip_space();
        self.expect(b'{')?;
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                self.skip_space();
                let key = self.string()?;
                self.skip_space();
                self.expect(b':')?;
                self.skip_space();
                let value = self.value(1)?;
                match key {
                    "session_id" => probe.session_id = value.map(Cow::Borrowed),
                    "timestamp" => probe.timestamp = value.map(Cow::Borrowed),
                    _ => {}
                }
                self.skip_space();
                match self.next()? {
                    b',' => continue,
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        self.skip_space();
        (self.at == self.bytes.len()).then_some(probe)
    }

    /// One value at `depth` (the containers around it); a string is returned.
    fn value(&mut self, depth: usize) -> Option<Option<&'a str>> {
        match self.peek()? {
            b'"' => return self.string().map(Some),
            b'{' => self.object(depth + 1)?,
            b'[' => self.array(depth + 1)?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        }
        Some(None)
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            self.skip_space();
            self.string()?;
            self.skip_space();
            self.expect(b':')?;
            self.skip_space();
            self.value(depth)?;
            self.skip_space();
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        self.skip_space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Some(());
        }
        loop {
            self.skip_space();
            self.value(depth)?;
            self.skip_space();
            match self.next()? {
                b',' => continue,
                b']' => return Some(()),
                _ => return None,
            }
        }
    }

    /// A string without escapes: its text between the quotes. A control
    /// character inside is an error, as in any JSON reader. Always inlined,
    /// as are the small steps below: built for size, LLVM keeps each a call,
    /// and a call's `Option<&str>` comes back through linear memory.
    #[inline(always)]
    fn string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.at;
        let len = quote_or_control(&self.bytes[start..])?;
        if self.bytes[start + len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Quotes are ASCII, so both ends are character boundaries.
        Some(&self.text[start..start + len])
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, and, as serde_json
    /// reads it, finite: an integer beyond 64 bits or any fraction or exponent
    /// is an f64, and one that overflows is refused.
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.first_digit()?;
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.first_digit()?;
            float = true;
        }
        let text = &self.text[start..self.at];
        let integer = !float && (text.parse::<u64>().is_ok() || text.parse::<i64>().is_ok());
        (integer || text.parse::<f64>().is_ok_and(f64::is_finite)).then_some(())
    }

    fn first_digit(&mut self) -> Option<()> {
        self.next().filter(u8::is_ascii_digit)?;
        self.digits();
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    #[inline(always)]
    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    #[inline(always)]
    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    #[inline(always)]
    fn expect(&mut self, want: u8) -> Option<()> {
        (self.next()? == want).then_some(())
    }
}

/// Where the first `"` or control character (below 0x20) of `bytes` is: the
/// end of a string, or what makes it invalid, in one pass over 8 bytes at a
/// time. The components are built for size, which turns off LLVM's
/// vectorizers, so the word test is written out (SWAR): a byte's high bit is
/// flagged when it is below 0x20 or when it is a quote (its XOR with `"` is
/// zero). A flag is exact for the lowest flagged byte, since a borrow only
/// carries upward, so that byte is the answer.
#[inline(always)]
fn quote_or_control(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let stops = |b: u8| b == b'"' || b < 0x20;
    let (words, rest) = bytes.as_chunks::<8>();
    for (i, word) in words.iter().enumerate() {
        let w = u64::from_le_bytes(*word);
        let unquoted = w ^ (ONES * u64::from(b'"'));
        let control = w.wrapping_sub(ONES * 0x20) & !w;
        let quote = unquoted.wrapping_sub(ONES) & !unquoted;
        let flags = (control | quote) & HIGHS;
        if flags != 0 {
            return Some(i * 8 + flags.trailing_zeros() as usize / 8);
        }
    }
    rest.iter().position(|&b| stops(b)).map(|at| words.len() * 8 + at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the serde_json reading makes of `data`: refused, or the two strings.
    fn by_serde(data: &str) -> Option<(Option<String>, Option<String>)> {
        let p = Probe::read(data).ok()?;
        Some((p.session_id.map(Cow::into_owned), p.timestamp.map(Cow::into_owned)))
    }

    fn by_scan(data: &str) -> Option<(Option<String>, Option<String>)> {
        let p = probe(data).ok()?;
        Some((p.session_id.map(Cow::into_owned), p.timestamp.map(Cow::into_owned)))
    }

    #[test]
    fn reads_what_serde_json_reads_and_refuses_what_it_refuses() {
        let nested = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n));
        let cases = [
            r#"{"session_id":"s","timestamp":"T","x":[1,{"y":null}]}"#.to_string(),
            r#"  { "session_id" : "s" , "n" : -0.5e-3 , "t":true,"f":false } "#.into(),
            r#"{"session_id":"x","session_id":"s","timestamp":"a","timestamp":1}"#.into(),
            r#"{"session_id":1,"timestamp":{"a":"b"}}"#.into(),
            r#"{"big":123456789012345678901234567890,"u":18446744073709551615,"i":-9223372036854775809}"#.into(),
            r#"{"x":1e308,"y":1e309}"#.into(),
            r#"{"x":-1e400}"#.into(),
            r#"{"x":1E+2,"y":0.0,"z":2e-999}"#.into(),
            "{}".into(),
            "\t{}\t".into(),
            r#"{"u":"é — 😀 </script>"}"#.into(),
            nested(125),
            nested(126),
            nested(127),
            format!("{{\"a\":{}{}}}", "{\"b\":".repeat(126), "}".repeat(126)),
            format!("{{\"a\":{}1{}}}", "{\"b\":".repeat(127), "}".repeat(127)),
        ];
        let refused = [
            "",
            "[]",
            "1",
            "\"s\"",
            "null",
            "{",
            "}",
            "{}{}",
            "{} x",
            "{,}",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{"a":}"#,
            r#"{a:1}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":-}"#,
            r#"{"a":1e}"#,
            r#"{"a":+1}"#,
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":[1 2]}"#,
            "{\"a\":\"\u{1}\"}",
            "{\"a\":\"\u{1f}\"}",
            "{\"a\":\"x}",
            "{\"a\u{0}\":1}",
            r#"{"a":NaN}"#,
            r#"{"a":Infinity}"#,
            "{\"a\":1}\u{a0}",
        ];
        for data in cases.iter().map(String::as_str).chain(refused) {
            assert_eq!(by_scan(data), by_serde(data), "{data:?}");
        }
        assert!(by_serde(&nested(126)).is_some() && by_serde(&nested(127)).is_none(), "the limit is where it was");
    }

    fn json_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            any::<f64>().prop_map(|f| format!("{f:e}")),
            "[ -~é]{0,8}".prop_map(|s| format!("\"{}\"", s.replace(['"', '\\'], ""))),
            "[0-9eE+.-]{1,6}",
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((prop_oneof!["session_id", "timestamp", "[a-z]{1,3}"], inner), 0..4).prop_map(
                    |v| format!(
                        "{{{}}}",
                        v.iter().map(|(k, v)| format!("\"{k}\" : {v}")).collect::<Vec<_>>().join(",")
                    )
                ),
            ]
        })
    }

    proptest! {
        /// Every position: inside a word, at its edges and in the tail, next to
        /// bytes that borrow (0x00, 0x20, 0x21, 0x23, 0x80, 0xff).
        #[test]
        fn finds_the_first_quote_or_control_byte(bytes in prop::collection::vec(prop_oneof![
            6 => 0x20u8..=0xff,
            2 => prop::sample::select(vec![0x00u8, 0x1f, 0x20, 0x21, 0x23, 0x7f, 0x80, 0xa2, 0xff]),
            1 => Just(b'"'),
            1 => 0u8..0x20,
        ], 0..80)) {
            let naive = bytes.iter().position(|&b| b == b'"' || b < 0x20);
            prop_assert_eq!(quote_or_control(&bytes), naive);
        }

        #[test]
        fn agrees_with_serde_json_on_any_text_without_escapes(text in json_text(), cut in 0usize..64, junk in "[ ,:{}\\[\\]\"a0-]{0,2}") {
            let mut data = text;
            // Damaged forms too: cut short, or with a stray byte.
            if cut < 8 {
                let end = (data.len() * cut / 8).min(data.len());
                let end = (0..=end).rev().find(|&i| data.is_char_boundary(i)).unwrap_or(0);
                data.truncate(end);
            } else if cut < 16 {
                data.push_str(&junk);
            }
            prop_assert_eq!(by_scan(&data), by_serde(&data), "{:?}", data);
        }
    }
}
