//! Last line of defence for INV-ADMIN-KEY: if an upstream answer ever holds
//! one of our keys (an echoing error page, a misconfigured upstream), the key
//! is replaced before the answer leaves the server.
//!
//! Redaction works on what the browser will decode, not on the bytes: a JSON
//! string is matched after its escapes are undone (`\u0061dm…` is `adm…` to
//! `JSON.parse`), object keys included, and text the page joins (a turn's
//! `text` and `thinking` deltas) is matched across deltas ([`Joined`]).

use std::borrow::Cow;

use memchr::arch::all::packedpair::Pair;
use memchr::{memchr, memchr2, memmem};

pub const REDACTED: &str = "[redacted]";

/// Keys shorter than this are not redacted: a one-letter dev key would
/// shred every body, and a real key is never that short.
const MIN_SECRET_LEN: usize = 6;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// The keys as text, longest first (a key that contains another is
    /// redacted whole).
    secrets: Vec<String>,
    /// The forms a key can take in encoded output: the key, and its JSON
    /// escaped form where that differs. One searcher each, built once: the
    /// relays scan every frame.
    finders: Vec<memmem::Finder<'static>>,
    /// Two or three forms, each with its rarest byte and where that byte
    /// stands in it: [`Redactor::found`] looks for all of them in one pass
    /// (one form alone is memmem's own case).
    rare: Vec<(u8, usize)>,
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut secrets: Vec<String> =
            secrets.into_iter().filter(|s| s.len() >= MIN_SECRET_LEN).map(str::to_string).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let mut forms: Vec<String> = Vec::new();
        for secret in &secrets {
            forms.push(secret.clone());
            let quoted = serde_json::to_string(secret).expect("a string serialises");
            let escaped = &quoted[1..quoted.len() - 1];
            if escaped != secret {
                forms.push(escaped.to_string());
            }
        }
        forms.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let finders: Vec<_> = forms.iter().map(|s| memmem::Finder::new(s.as_bytes()).into_owned()).collect();
        // memchr's own ranking of bytes by how common they are in text.
        let rarest = |form: &String| {
            let at = usize::from(Pair::new(form.as_bytes())?.index1());
            Some((form.as_bytes()[at], at))
        };
        let rare = match forms.len() {
            2..=3 => forms.iter().map(rarest).collect::<Option<Vec<_>>>().unwrap_or_default(),
            _ => Vec::new(),
        };
        Self { secrets, finders, rare }
    }

    /// Whether any form of a key is in `bytes`. Two or three forms are
    /// looked for in one pass: one memchr for their rarest bytes, each place one
    /// stands checked for its whole form. In text where those bytes are
    /// common (more than one place in 64 bytes, past the first 16), each
    /// form is searched with its own memmem instead, whose worst case is
    /// linear, so no text makes the pass slower than that by more than its
    /// first checks.
    fn found(&self, bytes: &[u8]) -> bool {
        let each = || self.finders.iter().any(|f| f.find(bytes).is_some());
        let [first, ..] = self.rare[..] else { return each() };
        let byte = |i: usize| self.rare.get(i).map_or(first.0, |r| r.0);
        let mut checks = 0;
        for place in memchr::memchr3_iter(byte(0), byte(1), byte(2), bytes) {
            for (finder, &(rare, at)) in self.finders.iter().zip(&self.rare) {
                if bytes[place] == rare && place >= at && bytes[place - at..].starts_with(finder.needle()) {
                    return true;
                }
            }
            checks += 1;
            if checks > 16 + place / 64 {
                return each();
            }
        }
        false
    }

    /// Returns `text` with every key replaced, as text (an event name, a
    /// decoded string); borrowed when clean, the common case, so the hot
    /// path does not allocate.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if !self.found(text.as_bytes()) {
            return Cow::Borrowed(text);
        }
        let mut out = text.to_string();
        for finder in &self.finders {
            let form = std::str::from_utf8(finder.needle()).expect("keys are text");
            out = out.replace(form, REDACTED);
        }
        Cow::Owned(out)
    }

    /// Returns the JSON document `json` with every string, object keys
    /// included, that decodes to text holding a key replaced by its redacted
    /// text, re-encoded. Everything else is kept byte for byte (order,
    /// numbers, white space); a clean document without escapes is returned
    /// as it is, unparsed. `None` when it cannot be redacted as JSON: it is
    /// not JSON, or a key stands outside every string (in a number).
    pub fn redact_json<'t>(&self, json: &'t str) -> Option<Cow<'t, str>> {
        let bytes = json.as_bytes();
        if self.secrets.is_empty() || (memchr(b'\\', bytes).is_none() && !self.found(bytes)) {
            return Some(Cow::Borrowed(json));
        }
        serde_json::from_str::<serde::de::IgnoredAny>(json).ok()?;
        let mut out = String::new();
        let mut copied = 0;
        let mut at = 0;
        while let Some(open) = memchr(b'"', &bytes[at..]).map(|i| at + i) {
            let close = string_end(bytes, open + 1)?;
            let token = &json[open..=close];
            at = close + 1;
            let escaped = memchr(b'\\', token.as_bytes()).is_some();
            if !escaped && !self.found(token.as_bytes()) {
                continue;
            }
            let decoded: String = serde_json::from_str(token).ok()?;
            let redacted = self.redact(&decoded);
            // An escaped string that decodes clean stays as written.
            if matches!(redacted, Cow::Borrowed(_)) && !self.found(token.as_bytes()) {
                continue;
            }
            out.push_str(&json[copied..open]);
            out.push_str(&serde_json::to_string(&redacted).expect("a string serialises"));
            copied = at;
        }
        if copied == 0 {
            return (!self.found(bytes)).then_some(Cow::Borrowed(json));
        }
        out.push_str(&json[copied..]);
        (!self.found(out.as_bytes())).then_some(Cow::Owned(out))
    }

    /// How many bytes at the end of `text` could be the start of a key
    /// (the longest such end, shorter than the key itself): text the browser
    /// joins is held back that far until the next piece shows what follows.
    pub fn open_prefix_len(&self, text: &str) -> usize {
        let mut longest = 0;
        for secret in &self.secrets {
            let most = (secret.len() - 1).min(text.len());
            for len in (longest + 1..=most).rev() {
                if secret.is_char_boundary(len) && text.as_bytes().ends_with(&secret.as_bytes()[..len]) {
                    longest = len;
                    break;
                }
            }
        }
        longest
    }
}

/// The index of the quote that closes the JSON string whose content starts
/// at `from`.
fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let i = from + memchr2(b'"', b'\\', &bytes[from..])?;
        if bytes[i] == b'"' {
            return Some(i);
        }
        from = i + 2;
        if from > bytes.len() {
            return None;
        }
    }
}

/// Text the page joins from successive pieces (one turn's `text` deltas):
/// a key split across two pieces is redacted whole. The end of a piece that
/// could start a key is held back and goes out in front of the next piece
/// (or alone, from [`Joined::flush`], before the turn's terminal event), so
/// nothing is lost and no two pieces that leave can join into a key.
#[derive(Debug, Clone, Default)]
pub struct Joined {
    held: String,
}

impl Joined {
    /// The text to send for this piece.
    pub fn push(&mut self, redactor: &Redactor, piece: &str) -> String {
        let mut text = std::mem::take(&mut self.held);
        text.push_str(piece);
        let text = redactor.redact(&text).into_owned();
        let keep = text.len() - redactor.open_prefix_len(&text);
        self.held = text[keep..].to_string();
        let mut text = text;
        text.truncate(keep);
        text
    }

    /// What is held back, now (the pieces ended).
    pub fn flush(&mut self) -> Option<String> {
        (!self.held.is_empty()).then(|| std::mem::take(&mut self.held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "admin-key-123";
    const CONSUMER: &str = "consumer-456";

    fn r() -> Redactor {
        Redactor::new([ADMIN, CONSUMER])
    }

    /// Every \uXXXX form of `key`: all escaped, only the first, only the last.
    fn escaped_forms(key: &str) -> Vec<String> {
        let all: String = key.chars().map(|c| format!("\\u{:04x}", c as u32)).collect();
        let first = format!("\\u{:04X}{}", key.as_bytes()[0], &key[1..]);
        let n = key.len() - 1;
        let last = format!("{}\\u{:04x}", &key[..n], key.as_bytes()[n]);
        vec![all, first, last]
    }

    #[test]
    fn replaces_every_occurrence_of_every_key() {
        let out = r().redact(r#"{"a":"admin-key-123","b":"xconsumer-456y admin-key-123"}"#);
        assert!(!out.contains(ADMIN) && !out.contains(CONSUMER));
        assert_eq!(out.matches(REDACTED).count(), 3);
        assert!(matches!(r().redact("clean"), Cow::Borrowed(_)));
    }

    #[test]
    fn overlapping_keys_are_redacted_whole_and_short_or_empty_keys_ignored() {
        let r = Redactor::new(["secret", "secret-longer", "", "abc"]);
        assert_eq!(r.redact("secret-longer"), REDACTED);
        assert_eq!(r.redact("abc"), "abc");
    }

    #[test]
    fn escaped_keys_in_json_strings_and_object_keys_are_redacted_after_decoding() {
        for form in escaped_forms(ADMIN) {
            for doc in [
                format!(r#"{{"echo":"Bearer {form}"}}"#),
                format!(r#"{{"{form}":1}}"#),
                format!(r#"[1, {{"deep":["x", "{form} and {form}"]}}]"#),
            ] {
                let out = r().redact_json(&doc).unwrap();
                let decoded: serde_json::Value = serde_json::from_str(&out).unwrap();
                let again = decoded.to_string();
                assert!(!again.contains(ADMIN) && !out.contains(ADMIN), "{doc} -> {out}");
                assert!(again.contains(REDACTED), "{doc} -> {out}");
            }
        }
        // Re-serialising the decoded value can never bring a key back.
        let out = r().redact_json(r#"{"agents":[{"id":"a","note":"\u0063onsumer-456"}]}"#).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["agents"][0]["note"], REDACTED);
    }

    #[test]
    fn a_clean_document_is_kept_byte_for_byte_and_a_dirty_one_only_where_a_key_was() {
        let clean = r#"{ "b" : 1.50e3, "a":"line\nbreak \u00e9", "z": [true, null] }"#;
        assert!(matches!(r().redact_json(clean), Some(Cow::Borrowed(_))));
        let plain = r#"{"tools":[],"n":12345678901234567890}"#;
        assert!(matches!(r().redact_json(plain), Some(Cow::Borrowed(_))));
        let dirty = r#"{ "b" : 1.50e3, "k":"x admin-key-123", "e":"\u00e9" }"#;
        assert_eq!(r().redact_json(dirty).unwrap(), r#"{ "b" : 1.50e3, "k":"x [redacted]", "e":"\u00e9" }"#);
        assert!(matches!(Redactor::default().redact_json(dirty), Some(Cow::Borrowed(_))));
    }

    #[test]
    fn a_key_outside_any_string_or_a_document_that_is_not_json_cannot_be_redacted_as_json() {
        let digits = Redactor::new(["12345678"]);
        assert_eq!(digits.redact_json(r#"{"n":9123456789}"#), None);
        assert!(digits.redact_json(r#"{"n":"9123456789"}"#).is_some());
        assert_eq!(r().redact_json(r#"{"a":"\u0061dmin-key-123"#), None, "not JSON");
        assert_eq!(r().redact_json("admin-key-123"), None);
    }

    #[test]
    fn keys_with_characters_json_escapes_are_found_in_their_escaped_form() {
        let r = Redactor::new(["quo\"te-key"]);
        let encoded = serde_json::to_string(&serde_json::json!({ "k": "quo\"te-key" })).unwrap();
        let out = r.redact(&encoded);
        assert!(!out.contains("quo\\\"te-key"), "{out}");
        let out = r.redact_json(&encoded).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["k"], REDACTED);
    }

    #[test]
    fn the_open_prefix_is_the_longest_end_that_could_start_a_key() {
        assert_eq!(r().open_prefix_len("hello"), 0);
        assert_eq!(r().open_prefix_len("see admin-key-12"), "admin-key-12".len());
        assert_eq!(r().open_prefix_len("a co"), 2);
        assert_eq!(r().open_prefix_len("admin-key-123"), 0, "a whole key is redacted, not held");
        assert_eq!(r().open_prefix_len("é"), 0);
    }

    #[test]
    fn a_key_split_across_joined_pieces_never_leaves_whole() {
        let key = ADMIN;
        for cut in 1..key.len() {
            for before in ["", "say "] {
                let mut joined = Joined::default();
                let mut sent = joined.push(&r(), &format!("{before}{}", &key[..cut]));
                sent.push_str(&joined.push(&r(), &format!("{} done", &key[cut..])));
                sent.extend(joined.flush());
                assert_eq!(sent, format!("{before}{REDACTED} done"), "cut at {cut}");
            }
        }
        // Three pieces, one character each of the key's middle.
        let mut joined = Joined::default();
        let pieces = ["admin-", "k", "e", "y-123", "!"];
        let mut sent = Vec::new();
        for piece in pieces {
            sent.push(joined.push(&r(), piece));
        }
        assert!(sent.iter().all(|s| !s.contains("admin-k")), "{sent:?}");
        assert_eq!(sent.concat(), format!("{REDACTED}!"));
    }

    #[test]
    fn held_text_is_never_lost() {
        let mut joined = Joined::default();
        assert_eq!(joined.push(&r(), "ends in adm"), "ends in ");
        assert_eq!(joined.flush().as_deref(), Some("adm"));
        assert_eq!(joined.flush(), None);
        assert_eq!(joined.push(&r(), "adm"), "");
        assert_eq!(joined.push(&r(), "iral"), "admiral");
    }

    /// What `found` must answer: whether any form is anywhere in `text`.
    fn anywhere(r: &Redactor, text: &[u8]) -> bool {
        r.finders.iter().any(|f| text.windows(f.needle().len()).any(|w| w == f.needle()))
    }

    #[test]
    fn one_pass_looks_for_every_form_and_texts_full_of_rare_bytes_fall_back() {
        let r = r();
        assert_eq!(r.rare.len(), 2, "two keys, one pass");
        for (byte, at) in &r.rare {
            // The rare byte alone, thousands of times: the fallback, then a key at the very end.
            let mut text = vec![*byte; 5000];
            assert!(!r.found(&text));
            text.extend_from_slice(CONSUMER.as_bytes());
            assert!(r.found(&text));
            // A key whose rare byte is the text's first byte cannot start before it.
            assert!(*at < ADMIN.len().max(CONSUMER.len()));
        }
        assert!(r.found(format!("x{ADMIN}").as_bytes()) && r.found(CONSUMER.as_bytes()));
        assert!(!r.found(b"admin-key-12 consumer-45"));
        // Four forms (both keys have a JSON-escaped form): one memmem each.
        let quoted = Redactor::new(["quo\"te-key", "back\\slash-key"]);
        assert!(quoted.rare.is_empty() && quoted.found(br#"x quo\"te-key"#) && !quoted.found(b"quote-key"));
    }

    use proptest::strategy::Strategy;

    proptest::proptest! {
        #[test]
        fn one_pass_finds_exactly_what_a_search_for_each_form_finds(pieces in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(vec![ADMIN, CONSUMER, "admin-", "-key-12", "key-123", "consumer", "-456", "k", "5", "-"])
                    .prop_map(str::to_string),
                "[a-z0-9 -]{0,6}",
            ],
            0..60,
        )) {
            let r = r();
            let text = pieces.concat();
            proptest::prop_assert_eq!(r.found(text.as_bytes()), anywhere(&r, text.as_bytes()), "{:?}", text);
        }
    }
}
