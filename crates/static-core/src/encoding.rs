//! `Accept-Encoding` negotiation (RFC 9110 §12.5.3) over the precompressed variants.

/// A content coding we can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    Identity,
    Brotli,
    Gzip,
}

impl Encoding {
    /// The `Content-Encoding` token, `None` for identity.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Brotli => Some("br"),
            Encoding::Gzip => Some("gzip"),
        }
    }

    /// File-name suffix of the precompressed variant, `None` for identity.
    pub fn file_suffix(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Brotli => Some(".br"),
            Encoding::Gzip => Some(".gz"),
        }
    }

    /// Suffix appended inside the ETag quotes: each coding is its own representation.
    pub fn etag_suffix(self) -> &'static str {
        match self {
            Encoding::Identity => "",
            Encoding::Brotli => "-br",
            Encoding::Gzip => "-gz",
        }
    }

    /// Name used in the sidecar's variant list.
    pub fn sidecar_name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Brotli => "br",
            Encoding::Gzip => "gzip",
        }
    }

    pub fn from_sidecar_name(name: &str) -> Option<Encoding> {
        match name {
            "identity" => Some(Encoding::Identity),
            "br" => Some(Encoding::Brotli),
            "gzip" => Some(Encoding::Gzip),
            _ => None,
        }
    }
}

/// q-values in thousandths, so `q=0.001` and friends compare exactly.
type Milli = u16;

/// The best encoding among `available` (identity is always available).
///
/// No header: identity (old clients that never asked get no surprises).
/// Highest q wins; ties prefer br, then gzip, then identity. Identity not named in
/// the header (and not covered by `*`) is acceptable but least preferred, so
/// `br;q=0.5` still gets br. If the client refuses everything (`*;q=0`), identity
/// is served anyway, as RFC 9110 allows, rather than a 406.
pub fn negotiate(accept_encoding: Option<&str>, available: &[Encoding]) -> Encoding {
    let Some(header) = accept_encoding else {
        return Encoding::Identity;
    };
    let preferences = parse_accept_encoding(header);
    let q_of = |names: &[&str]| -> Option<Milli> {
        preferences
            .iter()
            .filter(|(name, _)| names.contains(&name.as_str()))
            .map(|(_, q)| *q)
            // Duplicates: the lowest wins, so a refusal is never overridden.
            .min()
    };
    let star = q_of(&["*"]);

    let mut best = (Encoding::Identity, q_of(&["identity"]).or(star).unwrap_or(1));
    // Listed in ascending priority, so a later equal q takes over.
    for (encoding, names) in [(Encoding::Gzip, &["gzip", "x-gzip"][..]), (Encoding::Brotli, &["br"][..])] {
        if !available.contains(&encoding) {
            continue;
        }
        let q = q_of(names).or(star).unwrap_or(0);
        if q > 0 && q >= best.1 {
            best = (encoding, q);
        }
    }
    best.0
}

/// `(lowercased coding, q in thousandths)` for each well-formed element.
/// Malformed elements are dropped, so they can never make a coding acceptable.
pub fn parse_accept_encoding(header: &str) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    'elements: for element in header.split(',') {
        let mut parts = element.split(';');
        let coding = parts.next().unwrap_or("").trim();
        if coding.is_empty() || !coding.bytes().all(is_token_byte) {
            continue;
        }
        let mut q = 1000;
        for param in parts {
            let Some((name, value)) = param.split_once('=') else {
                continue 'elements;
            };
            if name.trim().eq_ignore_ascii_case("q") {
                match parse_qvalue(value.trim()) {
                    Some(v) => q = v,
                    None => continue 'elements,
                }
            }
        }
        out.push((coding.to_ascii_lowercase(), q));
    }
    out
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`
fn parse_qvalue(value: &str) -> Option<Milli> {
    let (int, frac) = match value.split_once('.') {
        Some((int, frac)) => (int, frac),
        None => (value, ""),
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: Milli = 0;
    for (i, digit) in frac.bytes().enumerate() {
        thousandths += Milli::from(digit - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::Encoding::{Brotli, Gzip, Identity};
    use super::*;

    const BOTH: &[Encoding] = &[Brotli, Gzip];

    fn pick(header: &str) -> Encoding {
        negotiate(Some(header), BOTH)
    }

    #[test]
    fn no_header_means_identity() {
        assert_eq!(negotiate(None, BOTH), Identity);
    }

    #[test]
    fn empty_header_means_identity() {
        assert_eq!(pick(""), Identity);
        assert_eq!(pick("  "), Identity);
    }

    #[test]
    fn browsers_get_br() {
        assert_eq!(pick("gzip, deflate, br, zstd"), Brotli);
        assert_eq!(pick("gzip, deflate"), Gzip);
        assert_eq!(pick("deflate"), Identity);
    }

    #[test]
    fn br_preferred_at_equal_q() {
        assert_eq!(pick("gzip;q=0.8, br;q=0.8"), Brotli);
        assert_eq!(pick("gzip, br"), Brotli);
    }

    #[test]
    fn higher_q_wins() {
        assert_eq!(pick("br;q=0.5, gzip;q=0.9"), Gzip);
        assert_eq!(pick("br;q=0.5, gzip;q=0.4"), Brotli);
        assert_eq!(pick("gzip;q=0.999, br;q=0.998"), Gzip);
    }

    #[test]
    fn q_zero_means_not_acceptable() {
        assert_eq!(pick("br;q=0, gzip"), Gzip);
        assert_eq!(pick("br;q=0"), Identity);
        assert_eq!(pick("br;q=0.000, gzip;q=0"), Identity);
        assert_eq!(pick("*;q=0"), Identity);
        assert_eq!(pick("*;q=0, identity"), Identity);
    }

    #[test]
    fn star_covers_unlisted_codings() {
        assert_eq!(pick("*"), Brotli);
        assert_eq!(pick("gzip;q=1, *;q=0.5"), Gzip);
        assert_eq!(pick("br;q=0, *"), Gzip);
    }

    #[test]
    fn explicit_identity_competes() {
        assert_eq!(pick("identity, gzip;q=0.5"), Identity);
        assert_eq!(pick("identity;q=0.5, gzip"), Gzip);
        assert_eq!(pick("identity;q=0, gzip;q=0.1"), Gzip);
        // Implicit identity is acceptable but least preferred.
        assert_eq!(pick("br;q=0.1"), Brotli);
    }

    #[test]
    fn tokens_are_case_insensitive_and_whitespace_tolerant() {
        assert_eq!(pick("BR"), Brotli);
        assert_eq!(pick("  GZip ;  Q=0.7 , Br ; q = 0.5 "), Gzip);
        assert_eq!(pick("x-gzip"), Gzip);
        assert_eq!(pick("\tbr\t"), Brotli);
    }

    #[test]
    fn malformed_elements_never_enable_a_coding() {
        assert_eq!(pick("br;q=2"), Identity);
        assert_eq!(pick("br;q=0.5000"), Identity);
        assert_eq!(pick("br;q=abc"), Identity);
        assert_eq!(pick("br;q=-1"), Identity);
        assert_eq!(pick("br;q"), Identity);
        assert_eq!(pick("b r"), Identity);
        assert_eq!(pick(";q=1"), Identity);
        assert_eq!(pick(",,,"), Identity);
        // The malformed element is dropped; the rest of the header still counts.
        assert_eq!(pick("br;q=x, gzip"), Gzip);
    }

    #[test]
    fn duplicates_take_the_lowest_q() {
        assert_eq!(pick("br, br;q=0, gzip"), Gzip);
    }

    #[test]
    fn only_available_variants_are_chosen() {
        assert_eq!(negotiate(Some("br"), &[Gzip]), Identity);
        assert_eq!(negotiate(Some("br, gzip"), &[Gzip]), Gzip);
        assert_eq!(negotiate(Some("br, gzip"), &[]), Identity);
    }

    #[test]
    fn qvalue_grammar() {
        assert_eq!(parse_qvalue("1"), Some(1000));
        assert_eq!(parse_qvalue("1."), Some(1000));
        assert_eq!(parse_qvalue("1.000"), Some(1000));
        assert_eq!(parse_qvalue("1.001"), None);
        assert_eq!(parse_qvalue("0"), Some(0));
        assert_eq!(parse_qvalue("0.5"), Some(500));
        assert_eq!(parse_qvalue("0.05"), Some(50));
        assert_eq!(parse_qvalue("0.123"), Some(123));
        assert_eq!(parse_qvalue(".5"), None);
        assert_eq!(parse_qvalue(""), None);
        assert_eq!(parse_qvalue("00.5"), None);
    }
}
