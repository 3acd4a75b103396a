//! Last line of defence for INV-ADMIN-KEY: if an upstream body ever contains
//! one of our keys (an echoing error page, a misconfigured upstream), it is
//! replaced before the body leaves the server.

use memchr::memmem;

pub const REDACTED: &str = "[redacted]";

/// Keys shorter than this are not redacted: a one-letter dev key would
/// shred every body, and a real key is never that short.
const MIN_SECRET_LEN: usize = 6;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    /// One searcher per secret, built once: the relays scan every frame.
    finders: Vec<memmem::Finder<'static>>,
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut secrets: Vec<String> =
            secrets.into_iter().filter(|s| s.len() >= MIN_SECRET_LEN).map(str::to_string).collect();
        // Longest first, so a key that contains another is redacted whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let finders = secrets.iter().map(|s| memmem::Finder::new(s.as_bytes()).into_owned()).collect();
        Self { secrets, finders }
    }

    /// Returns `text` with every secret replaced (borrowed when clean, the
    /// common case, so the hot path does not allocate).
    pub fn redact<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        if !self.finders.iter().any(|f| f.find(text.as_bytes()).is_some()) {
            return std::borrow::Cow::Borrowed(text);
        }
        let mut out = text.to_string();
        for secret in &self.secrets {
            out = out.replace(secret.as_str(), REDACTED);
        }
        std::borrow::Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_every_occurrence_of_every_key() {
        let r = Redactor::new(["admin-key-123", "consumer-456"]);
        let out = r.redact(r#"{"a":"admin-key-123","b":"xconsumer-456y admin-key-123"}"#);
        assert!(!out.contains("admin-key-123") && !out.contains("consumer-456"));
        assert_eq!(out.matches(REDACTED).count(), 3);
        assert!(matches!(r.redact("clean"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn overlapping_keys_are_redacted_whole_and_short_or_empty_keys_ignored() {
        let r = Redactor::new(["secret", "secret-longer", "", "abc"]);
        assert_eq!(r.redact("secret-longer"), REDACTED);
        assert_eq!(r.redact("abc"), "abc");
    }
}
