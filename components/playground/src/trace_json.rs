//! The body of a trace read, written a step at a time with exactly the bytes
//! serde_json gives for the whole document built as a `Value`:
//!
//! ```text
//! {"steps":[{"data":…,"ended_at":…,"name":…,"started_at":…},…],"trace":{…,"step_count":N,…}}
//! ```
//!
//! `serde_json` (without `preserve_order`) writes object keys sorted, so
//! `steps` comes before `trace` and the step count is known when it is due.
//! A step's `data` is its stored text decoded and re-encoded: serde_json's
//! compact form, keys sorted, and text that is not JSON as a JSON string. Text
//! already in that form is copied as it is ([`is_canonical`] says when,
//! conservatively); anything else goes through serde_json as before.

use serde_json::Value;

use gateway_ledger::traces::StoredStep;

/// The body's first bytes.
pub const OPEN: &str = "{\"steps\":[";

/// Appends one step object (after a `,` unless it is the first).
pub fn write_step(step: &StoredStep, first: bool, out: &mut String) {
    if !first {
        out.push(',');
    }
    out.push_str("{\"data\":");
    write_data(step.data.as_deref(), out);
    out.push_str(",\"ended_at\":");
    write_opt_int(step.ended_at_ms, out);
    out.push_str(",\"name\":");
    write_str(&step.name, out);
    out.push_str(",\"started_at\":");
    write_opt_int(step.started_at_ms, out);
    out.push('}');
}

/// Appends the end of the body: the steps array closed, then the trace object.
pub fn write_close(trace: &Value, out: &mut String) {
    out.push_str("],\"trace\":");
    out.push_str(&trace.to_string());
    out.push('}');
}

/// A step's stored `data` as the body carries it: the JSON it holds, or the
/// text as a string when it is not JSON; NULL is `null`.
pub fn write_data(raw: Option<&str>, out: &mut String) {
    match raw {
        None => out.push_str("null"),
        Some(text) if is_canonical(text) => out.push_str(text),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(value) => out.push_str(&value.to_string()),
            Err(_) => write_str(text, out),
        },
    }
}

fn write_opt_int(v: Option<i64>, out: &mut String) {
    match v {
        None => out.push_str("null"),
        Some(v) => write_int(v, out),
    }
}

/// Decimal, as serde_json (and `Display`) writes an `i64`; without the
/// formatting machinery, which was a tenth of the component's time per step.
fn write_int(v: i64, out: &mut String) {
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    out.extend(digits[at..].iter().map(|&d| d as char));
}

/// A JSON string exactly as serde_json escapes it: `"` and `\`, the short
/// forms `\b \f \n \r \t`, `\u00xx` for the other control characters, and
/// everything else as it is.
pub fn write_str(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every byte escaped is ASCII, so these slices are on char boundaries.
        out.push_str(&s[start..i]);
        if short.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        } else {
            out.push_str(short);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Nesting deeper than this takes the slow path (serde_json refuses past 127).
const MAX_DEPTH: u32 = 100;

/// True when `text` is a JSON document that serde_json would decode and
/// re-encode to these same bytes. Conservative: `false` only costs the slow
/// path. True means: no whitespace outside strings; object keys without
/// escapes, in strictly increasing byte order (so no duplicates); strings
/// whose escapes are the ones serde_json writes (`\" \\ \b \f \n \r \t`,
/// no `\u`, no `\/`) and without raw control characters; integers of at
/// most 18 digits without a leading zero, and not `-0` (no fraction or
/// exponent: floats take the slow path); nesting at most [`MAX_DEPTH`].
pub fn is_canonical(text: &str) -> bool {
    let mut scan = Scan { b: text.as_bytes(), i: 0 };
    scan.value(0) && scan.i == scan.b.len()
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn value(&mut self, depth: u32) -> bool {
        match self.peek() {
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().is_some(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.integer(),
            _ => false,
        }
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        let ok = self.b[self.i..].starts_with(word);
        self.i += word.len();
        ok
    }

    fn integer(&mut self) -> bool {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        let digits = &self.b[start..self.i];
        // u64 / i64 either way; a longer one may be out of range and become a float.
        let in_range = !digits.is_empty() && digits.len() <= 18;
        // `01` is not JSON; `-0` decodes as the float -0.0 and comes back as `-0.0`.
        let plain = digits.first() != Some(&b'0') || (digits.len() == 1 && !negative);
        in_range && plain && !matches!(self.peek(), Some(b'.' | b'e' | b'E'))
    }

    /// A string's content (between its quotes) if it is as serde_json writes it.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.i += 1;
        let start = self.i;
        loop {
            match *self.b.get(self.i)? {
                b'"' => {
                    let content = &self.b[start..self.i];
                    self.i += 1;
                    return Some(content);
                }
                b'\\' => match self.b.get(self.i + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                    _ => return None,
                },
                0x00..=0x1f => return None,
                _ => self.i += 1,
            }
        }
    }

    fn array(&mut self, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        self.i += 1;
        if self.peek() == Some(b']') {
            self.i += 1;
            return true;
        }
        loop {
            if !self.value(depth) {
                return false;
            }
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return true;
                }
                _ => return false,
            }
        }
    }

    fn object(&mut self, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        self.i += 1;
        if self.peek() == Some(b'}') {
            self.i += 1;
            return true;
        }
        let mut previous: Option<&[u8]> = None;
        loop {
            if self.peek() != Some(b'"') {
                return false;
            }
            let Some(key) = self.string() else { return false };
            // An escaped key sorts by what it decodes to: the slow path sorts it.
            if key.contains(&b'\\') || previous.is_some_and(|p| p >= key) {
                return false;
            }
            previous = Some(key);
            if self.peek() != Some(b':') {
                return false;
            }
            self.i += 1;
            if !self.value(depth) {
                return false;
            }
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return true;
                }
                _ => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the body carried before streaming: the text decoded to a `Value`
    /// (or kept as a string), re-encoded by serde_json.
    fn reference(raw: Option<&str>) -> String {
        let value = match raw {
            None => Value::Null,
            Some(text) => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string())),
        };
        value.to_string()
    }

    fn written(raw: Option<&str>) -> String {
        let mut out = String::new();
        write_data(raw, &mut out);
        out
    }

    #[test]
    fn data_is_written_as_serde_json_re_encodes_it() {
        let deep_ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let deep_slow = format!("{}{}", "[".repeat(101), "]".repeat(101));
        let too_deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
        let cases: Vec<(&str, bool)> = vec![
            // (text, taken by the fast path)
            ("{\"a\":[1,2]}", true),
            ("{\"model\":\"m\",\"output\":\"A chunk.\",\"tokens\":41}", true),
            ("{}", true),
            ("[]", true),
            ("42", true),
            ("-7", true),
            ("0", true),
            ("true", true),
            ("null", true),
            ("\"just a string\"", true),
            ("{\"a\":{\"b\":[true,false,null,{}]},\"b\":\"x\"}", true),
            ("{\"q\":\"\\\"quoted\\\" \\\\ \\n\\r\\t\\b\\f\"}", true),
            ("{\"u\":\"å ✓ 😀 \u{7f} \u{2028}\"}", true),
            ("{\"\":1,\"a\":2}", true),
            ("{\"a\":1,\"ab\":2,\"b\":3,\"é\":4}", true),
            ("999999999999999999", true),
            ("-999999999999999999", true),
            (&deep_ok, true),
            // Unsorted keys, duplicates, whitespace.
            ("{\"b\":1,\"a\":2}", false),
            ("{\"a\":1,\"a\":2}", false),
            ("{\"é\":1,\"z\":2}", false),
            ("{ \"a\": 1 }", false),
            (" {}", false),
            ("{}\n", false),
            ("[1, 2]", false),
            ("{\"a\":[{\"d\":1,\"c\":2}]}", false),
            // Escapes serde_json does not write, escaped keys.
            ("\"\\u00e5\"", false),
            ("\"\\u0001\"", false),
            ("\"\\ud83d\\ude00\"", false),
            ("\"a\\/b\"", false),
            ("{\"\\u0062\":1,\"a\":2}", false),
            ("{\"a\\n\":1}", false),
            // Numbers serde_json writes differently, or not at all.
            ("1.0", false),
            ("1e5", false),
            ("1E5", false),
            ("-0", false),
            ("-0.0", false),
            ("0.1", false),
            ("1.5e300", false),
            ("12345678901234567890", false),
            ("-9223372036854775809", false),
            ("1234567890123456789", false),
            ("18446744073709551615", false),
            ("01", false),
            ("+1", false),
            // Not JSON: kept as a string.
            ("not json", false),
            ("", false),
            ("{", false),
            ("{\"a\":1,}", false),
            ("[1,]", false),
            ("{\"a\"}", false),
            ("tru", false),
            ("nul", false),
            ("\"open", false),
            ("\"tab\tinside\"", false),
            ("{} {}", false),
            ("\"\\x\"", false),
            (&deep_slow, false),
            (&too_deep, false),
        ];
        for (text, fast) in cases {
            assert_eq!(is_canonical(text), fast, "fast path for {text:?}");
            assert_eq!(written(Some(text)), reference(Some(text)), "bytes for {text:?}");
        }
        assert_eq!(written(None), "null");
        assert_eq!(written(Some("1e5")), "100000.0");
        assert_eq!(written(Some("-0")), "-0.0");
        assert_eq!(written(Some("not json")), "\"not json\"");
        assert_eq!(written(Some(&too_deep)), json!(too_deep).to_string(), "serde_json refuses it: a string");
    }

    #[test]
    fn integers_are_written_as_serde_json_writes_them() {
        for v in [0, 1, -1, 9, 10, -10, 1_796_000_000_012, i64::MAX, i64::MIN, i64::MIN + 1, 1_000_000_000_000_000_000]
        {
            let mut out = String::new();
            write_opt_int(Some(v), &mut out);
            assert_eq!(out, json!(v).to_string());
        }
        let mut out = String::new();
        write_opt_int(None, &mut out);
        assert_eq!(out, "null");
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut every: String = (0u32..0x100).filter_map(char::from_u32).collect();
        every.push_str("\u{2028}\u{2029}\u{fffd}😀 é \\ \" /");
        for s in [every.as_str(), "", "plain", "\"", "\\", "end\u{1f}"] {
            let mut out = String::new();
            write_str(s, &mut out);
            assert_eq!(out, serde_json::to_string(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn a_step_is_the_object_serde_json_writes() {
        let step = StoredStep {
            seq: 3,
            name: "llm.\"call\"\n".into(),
            started_at_ms: Some(-5),
            ended_at_ms: None,
            data: Some("{\"z\":1, \"a\":2.50}".into()),
        };
        let mut out = String::new();
        write_step(&step, true, &mut out);
        let expected = json!({
            "name": step.name,
            "started_at": step.started_at_ms,
            "ended_at": step.ended_at_ms,
            "data": serde_json::from_str::<Value>(step.data.as_deref().unwrap()).unwrap(),
        });
        assert_eq!(out, expected.to_string());
        let mut more = String::new();
        write_step(&step, false, &mut more);
        assert_eq!(more, format!(",{out}"));
    }
}
