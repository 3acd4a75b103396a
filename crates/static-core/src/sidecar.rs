//! The per-file `<rel>.meta.json` written by `precompress` and trusted by the
//! component only while the source still has the recorded content (size and ETag,
//! which is the content's XXH3-128): modification times do not count, because
//! `spin up` copies the files at start-up and so resets them.

use serde::{Deserialize, Serialize};

use crate::csp::{is_plausible_hash, InlineHashes};
use crate::encoding::Encoding;
use crate::etag::is_plausible_etag;

/// Bumped when the sidecar's meaning changes; other versions count as stale.
/// 2: freshness by content (size + ETag); 1 compared size + mtime.
pub const SIDECAR_FORMAT: u32 = 2;

/// One precompressed variant: `<rel>.br` or `<rel>.gz` in the output directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantRecord {
    /// `br` or `gzip`.
    pub encoding: String,
    pub size: u64,
}

/// Contents of `<rel>.meta.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sidecar {
    pub format: u32,
    /// Size of the identity bytes.
    pub size: u64,
    /// Strong ETag of the identity bytes (see [`crate::content_etag`]): their identity.
    pub etag: String,
    pub variants: Vec<VariantRecord>,
    /// Inline `<script>`/`<style>` hashes; present for HTML only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csp: Option<InlineHashes>,
}

impl Sidecar {
    /// Parses a sidecar, refusing anything we would not have written (an edited or
    /// truncated sidecar must not inject header values).
    pub fn parse(bytes: &[u8]) -> Option<Sidecar> {
        let sidecar: Sidecar = serde_json::from_slice(bytes).ok()?;
        let valid = sidecar.format == SIDECAR_FORMAT
            && is_plausible_etag(&sidecar.etag)
            && sidecar
                .variants
                .iter()
                .all(|v| matches!(Encoding::from_sidecar_name(&v.encoding), Some(Encoding::Brotli | Encoding::Gzip)))
            && sidecar
                .csp
                .as_ref()
                .is_none_or(|csp| csp.scripts.iter().chain(&csp.styles).all(|h| is_plausible_hash(h)));
        valid.then_some(sidecar)
    }

    pub fn to_json(&self) -> String {
        // Serialising plain structs of strings and integers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Fresh = the source has exactly the recorded size and content tag, so the
    /// recorded variants and CSP hashes still describe it.
    pub fn is_fresh_for(&self, size: u64, etag: &str) -> bool {
        self.format == SIDECAR_FORMAT && self.size == size && self.etag == etag
    }

    /// The recorded size of a variant, if precompress made one.
    pub fn variant_size(&self, encoding: Encoding) -> Option<u64> {
        self.variants.iter().find(|v| v.encoding == encoding.sidecar_name()).map(|v| v.size)
    }

    /// Coded variants recorded, in no particular order.
    pub fn encodings(&self) -> Vec<Encoding> {
        self.variants.iter().filter_map(|v| Encoding::from_sidecar_name(&v.encoding)).collect()
    }
}

/// Where precompress puts the sidecar of `rel`, relative to its output directory.
pub fn sidecar_rel_path(rel: &str) -> String {
    format!("{rel}.meta.json")
}

/// Where precompress puts a coded variant of `rel`; `None` for identity.
pub fn variant_rel_path(rel: &str, encoding: Encoding) -> Option<String> {
    encoding.file_suffix().map(|suffix| format!("{rel}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "\"AAAAAAAAAAAAAAAAAAAAAA\"";

    fn sidecar() -> Sidecar {
        Sidecar {
            format: SIDECAR_FORMAT,
            size: 1234,
            etag: TAG.to_owned(),
            variants: vec![
                VariantRecord { encoding: "br".to_owned(), size: 300 },
                VariantRecord { encoding: "gzip".to_owned(), size: 400 },
            ],
            csp: Some(InlineHashes {
                scripts: vec!["sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=".to_owned()],
                styles: vec![],
            }),
        }
    }

    #[test]
    fn fresh_only_when_size_and_content_tag_match_exactly() {
        let s = sidecar();
        assert!(s.is_fresh_for(1234, TAG));
        assert!(!s.is_fresh_for(1235, TAG));
        assert!(!s.is_fresh_for(1234, "\"AAAAAAAAAAAAAAAAAAAAAB\""));
        assert!(!s.is_fresh_for(1234, "\"AAAAAAAAAAAAAAAAAAAAAA-br\""));
    }

    #[test]
    fn other_formats_are_stale() {
        let s = Sidecar { format: SIDECAR_FORMAT + 1, ..sidecar() };
        assert!(!s.is_fresh_for(1234, TAG));
        assert!(Sidecar::parse(s.to_json().as_bytes()).is_none());
    }

    #[test]
    fn round_trips_through_json() {
        let s = sidecar();
        assert_eq!(Sidecar::parse(s.to_json().as_bytes()), Some(s.clone()));
        assert_eq!(s.variant_size(Encoding::Brotli), Some(300));
        assert_eq!(s.variant_size(Encoding::Gzip), Some(400));
        assert_eq!(s.variant_size(Encoding::Identity), None);
        assert_eq!(s.encodings(), vec![Encoding::Brotli, Encoding::Gzip]);
    }

    #[test]
    fn non_html_sidecar_has_no_csp_field() {
        let s = Sidecar { csp: None, ..sidecar() };
        assert!(!s.to_json().contains("csp"));
        assert_eq!(Sidecar::parse(s.to_json().as_bytes()), Some(s));
    }

    #[test]
    fn tampered_or_broken_sidecars_are_ignored() {
        let bad_etag = Sidecar { etag: "\"x\r\nSet-Cookie: a=b\"".to_owned(), ..sidecar() };
        assert!(Sidecar::parse(bad_etag.to_json().as_bytes()).is_none());
        let bad_hash = Sidecar {
            csp: Some(InlineHashes { scripts: vec!["'unsafe-inline'".to_owned()], styles: vec![] }),
            ..sidecar()
        };
        assert!(Sidecar::parse(bad_hash.to_json().as_bytes()).is_none());
        let bad_variant =
            Sidecar { variants: vec![VariantRecord { encoding: "identity".to_owned(), size: 1 }], ..sidecar() };
        assert!(Sidecar::parse(bad_variant.to_json().as_bytes()).is_none());
        assert!(Sidecar::parse(b"").is_none());
        assert!(Sidecar::parse(b"{\"format\":1").is_none());
        assert!(Sidecar::parse(b"[]").is_none());
    }

    #[test]
    fn output_paths() {
        assert_eq!(sidecar_rel_path("x/y.css"), "x/y.css.meta.json");
        assert_eq!(variant_rel_path("x/y.css", Encoding::Brotli).as_deref(), Some("x/y.css.br"));
        assert_eq!(variant_rel_path("x/y.css", Encoding::Gzip).as_deref(), Some("x/y.css.gz"));
        assert_eq!(variant_rel_path("x/y.css", Encoding::Identity), None);
    }
}
