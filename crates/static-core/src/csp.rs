//! CSP hash sources for the inline `<script>` and `<style>` elements of an HTML page,
//! and the page's `Content-Security-Policy`.
//!
//! The scanner follows the HTML tokenizer where it matters for hashing: comments are
//! skipped, attribute values may hide `<script>`, `title`/`textarea` and the raw-text
//! elements swallow markup, a script/style body ends at the first `</script`/`</style`
//! followed by whitespace, `/` or `>`, and newlines are normalised (CRLF, CR -> LF)
//! before hashing as browsers do. Known gap: `<script>` inside inline `<svg>` is
//! foreign content whose entities the browser decodes; we hash it raw.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// CSP hash sources (`sha256-<base64>`, without quotes), in document order, deduplicated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineHashes {
    pub scripts: Vec<String>,
    pub styles: Vec<String>,
}

/// The `Content-Security-Policy` for an HTML page with these inline hashes.
///
/// `script-src` also allows `'self'` so a page may load its own module files; that
/// is safe because every non-script response here carries `nosniff` with a
/// non-JavaScript type, so the browser refuses to run it as a script.
pub fn content_security_policy(hashes: &InlineHashes) -> String {
    let mut policy = String::from("default-src 'none'; script-src 'self'");
    for hash in &hashes.scripts {
        policy.push_str(" '");
        policy.push_str(hash);
        policy.push('\'');
    }
    policy.push_str("; style-src 'self'");
    for hash in &hashes.styles {
        policy.push_str(" '");
        policy.push_str(hash);
        policy.push('\'');
    }
    policy.push_str(
        "; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
         base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    );
    policy
}

/// Policy for non-HTML error bodies: nothing may load, nothing may frame them.
pub const ERROR_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// `sha256-<base64 of 32 bytes>`: guards against a tampered sidecar.
pub fn is_plausible_hash(hash: &str) -> bool {
    hash.strip_prefix("sha256-").is_some_and(|b64| {
        b64.len() == 44
            && b64.ends_with('=')
            && b64[..43].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    })
}

/// `sha256-<base64>` of a script or style body, after newline normalisation.
pub fn hash_source(body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    let mut i = 0;
    while i < body.len() {
        // Feed runs without CR directly; CR and CRLF each become one LF.
        let run_end = body[i..].iter().position(|&b| b == b'\r').map_or(body.len(), |p| i + p);
        hasher.update(&body[i..run_end]);
        if run_end == body.len() {
            break;
        }
        hasher.update(b"\n");
        i = run_end + 1;
        if body.get(i) == Some(&b'\n') {
            i += 1;
        }
    }
    format!("sha256-{}", STANDARD.encode(hasher.finalize()))
}

/// Hashes of every inline `<script>` (without `src`) and `<style>` in `html`.
pub fn inline_hashes(html: &[u8]) -> InlineHashes {
    let mut hashes = InlineHashes::default();
    let mut i = 0;
    while let Some(offset) = html[i..].iter().position(|&b| b == b'<') {
        let lt = i + offset;
        let rest = &html[lt..];
        if rest.starts_with(b"<!--") {
            i = comment_end(html, lt);
            continue;
        }
        if rest.starts_with(b"<!") || rest.starts_with(b"<?") || is_end_tag_start(rest) {
            i = tag_end(html, lt + 1).0;
            continue;
        }
        let Some(name) = start_tag_name(rest) else {
            i = lt + 1;
            continue;
        };
        let (after_tag, has_src) = tag_end(html, lt + 1 + name.len());
        let name = name.to_ascii_lowercase();
        let Some(kind) = raw_kind(&name) else {
            i = after_tag;
            continue;
        };
        let (body_end, resume) = find_end_tag(html, after_tag, name.as_bytes());
        let body = &html[after_tag.min(body_end)..body_end];
        match kind {
            RawKind::Script if !has_src => push_unique(&mut hashes.scripts, hash_source(body)),
            RawKind::Style => push_unique(&mut hashes.styles, hash_source(body)),
            _ => {}
        }
        i = resume;
    }
    hashes
}

enum RawKind {
    Script,
    Style,
    /// Elements whose content is text, not markup (RCDATA/RAWTEXT/PLAINTEXT-ish).
    Other,
}

fn raw_kind(name: &str) -> Option<RawKind> {
    match name {
        "script" => Some(RawKind::Script),
        "style" => Some(RawKind::Style),
        "title" | "textarea" | "xmp" | "iframe" | "noembed" | "noframes" | "noscript" => Some(RawKind::Other),
        _ => None,
    }
}

fn push_unique(list: &mut Vec<String>, hash: String) {
    if !list.contains(&hash) {
        list.push(hash);
    }
}

fn is_end_tag_start(rest: &[u8]) -> bool {
    rest.starts_with(b"</") && rest.get(2).is_some_and(u8::is_ascii_alphabetic)
}

/// The tag name after `<`, if this is a start tag.
fn start_tag_name(rest: &[u8]) -> Option<&str> {
    if !rest.get(1).is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let len = rest[1..].iter().position(|&b| is_html_space(b) || b == b'/' || b == b'>').unwrap_or(rest.len() - 1);
    std::str::from_utf8(&rest[1..1 + len]).ok()
}

/// Index just past the `>` ending a tag whose attributes start at `from`, honouring
/// quoted attribute values; and whether the tag has a `src` attribute.
fn tag_end(html: &[u8], from: usize) -> (usize, bool) {
    let mut i = from;
    let mut has_src = false;
    while i < html.len() {
        match html[i] {
            b'>' => return (i + 1, has_src),
            b if is_html_space(b) || b == b'/' => i += 1,
            _ => {
                let name_start = i;
                while i < html.len() && !is_html_space(html[i]) && !matches!(html[i], b'/' | b'>' | b'=') {
                    i += 1;
                }
                has_src |= html[name_start..i].eq_ignore_ascii_case(b"src");
                while i < html.len() && is_html_space(html[i]) {
                    i += 1;
                }
                if html.get(i) == Some(&b'=') {
                    i += 1;
                    while i < html.len() && is_html_space(html[i]) {
                        i += 1;
                    }
                    match html.get(i) {
                        Some(&quote @ (b'"' | b'\'')) => {
                            i = html[i + 1..].iter().position(|&b| b == quote).map_or(html.len(), |p| i + 1 + p + 1);
                        }
                        _ => {
                            while i < html.len() && !is_html_space(html[i]) && html[i] != b'>' {
                                i += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    (html.len(), has_src)
}

/// `(start of the end tag, index after it)` for `</name` + space, `/` or `>`;
/// the body runs to the end of the document when there is none.
fn find_end_tag(html: &[u8], from: usize, name: &[u8]) -> (usize, usize) {
    let mut i = from;
    while let Some(offset) = html.get(i..).and_then(|rest| rest.windows(2).position(|w| w == b"</")) {
        let start = i + offset;
        let name_end = start + 2 + name.len();
        let matches_name = html.get(start + 2..name_end).is_some_and(|n| n.eq_ignore_ascii_case(name));
        let terminated = html.get(name_end).is_none_or(|&b| is_html_space(b) || b == b'/' || b == b'>');
        if matches_name && terminated {
            return (start, tag_end(html, name_end).0);
        }
        i = start + 2;
    }
    (html.len(), html.len())
}

/// Index after a comment starting at `lt` (`<!--`), including the abrupt `<!-->` forms.
fn comment_end(html: &[u8], lt: usize) -> usize {
    let body = lt + 4;
    if html.get(body) == Some(&b'>') {
        return body + 1;
    }
    if html.get(body..body + 2) == Some(b"->") {
        return body + 2;
    }
    let mut i = body;
    while i < html.len() {
        if html[i..].starts_with(b"-->") {
            return i + 3;
        }
        if html[i..].starts_with(b"--!>") {
            return i + 4;
        }
        i += 1;
    }
    html.len()
}

fn is_html_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(body: &str) -> String {
        hash_source(body.as_bytes())
    }

    #[test]
    fn known_hash_of_empty_body() {
        // Well-known value browsers print for an empty inline script.
        assert_eq!(h(""), "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
        assert!(is_plausible_hash(&h("")));
    }

    #[test]
    fn newlines_are_normalised_before_hashing() {
        assert_eq!(h("a\r\nb"), h("a\nb"));
        assert_eq!(h("a\rb"), h("a\nb"));
        assert_eq!(h("a\r\r\nb"), h("a\n\nb"));
        assert_eq!(h("a\r"), h("a\n"));
        assert_ne!(h("a\n\nb"), h("a\nb"));
    }

    #[test]
    fn finds_inline_scripts_and_styles() {
        let html = "<!doctype html><html><head><style>body{color:red}</style>\
                    <script>console.log(1)</script></head><body>\
                    <SCRIPT type=\"module\">import './a.js';</SCRIPT></body></html>";
        let hashes = inline_hashes(html.as_bytes());
        assert_eq!(hashes.styles, vec![h("body{color:red}")]);
        assert_eq!(hashes.scripts, vec![h("console.log(1)"), h("import './a.js';")]);
    }

    #[test]
    fn external_scripts_are_not_hashed() {
        let html = "<script src=\"/app.js\"></script><script defer SRC=/b.js></script><script>x()</script>";
        assert_eq!(inline_hashes(html.as_bytes()).scripts, vec![h("x()")]);
    }

    #[test]
    fn data_src_is_not_src() {
        let html = "<script data-src=\"/x.js\">y()</script>";
        assert_eq!(inline_hashes(html.as_bytes()).scripts, vec![h("y()")]);
    }

    #[test]
    fn body_is_exact_source_text() {
        let body = "\n  const s = '</scrip' + 't>';\n  if (a < b && c > d) {}\n";
        let html = format!("<script>{body}</script>");
        assert_eq!(inline_hashes(html.as_bytes()).scripts, vec![h(body)]);
    }

    #[test]
    fn end_tag_needs_a_delimiter() {
        let html = "<script>a='</scriptx>'</script >";
        assert_eq!(inline_hashes(html.as_bytes()).scripts, vec![h("a='</scriptx>'")]);
        let html = "<style>p{}</STYLE\n>";
        assert_eq!(inline_hashes(html.as_bytes()).styles, vec![h("p{}")]);
    }

    #[test]
    fn comments_and_attributes_hide_markup() {
        let html = "<!-- <script>evil()</script> --><div title=\"<script>no()</script>\">\
                    <p data-x='<style>x</style>'></p></div><script>yes()</script>";
        let hashes = inline_hashes(html.as_bytes());
        assert_eq!(hashes.scripts, vec![h("yes()")]);
        assert!(hashes.styles.is_empty());
    }

    #[test]
    fn text_elements_swallow_markup() {
        let html = "<title><script>no()</script></title><textarea><style>x</style></textarea>\
                    <noscript><script>no2()</script></noscript><script>yes()</script>";
        let hashes = inline_hashes(html.as_bytes());
        assert_eq!(hashes.scripts, vec![h("yes()")]);
        assert!(hashes.styles.is_empty());
    }

    #[test]
    fn abrupt_comments() {
        let html = "<!--><script>a()</script><!---><script>b()</script>";
        assert_eq!(inline_hashes(html.as_bytes()).scripts, vec![h("a()"), h("b()")]);
    }

    #[test]
    fn duplicates_are_listed_once() {
        let html = "<script>x()</script><script>x()</script>";
        assert_eq!(inline_hashes(html.as_bytes()).scripts, vec![h("x()")]);
    }

    #[test]
    fn unterminated_script_runs_to_end() {
        let html = "<script>x()";
        assert_eq!(inline_hashes(html.as_bytes()).scripts, vec![h("x()")]);
        assert_eq!(inline_hashes(b"<script").scripts, vec![h("")]);
    }

    #[test]
    fn garbage_never_panics() {
        for html in [&b""[..], b"<", b"<<<", b"</", b"<!--", b"<a b='", b"<script a=\"", b"\xff<\xfe>", b"</script"] {
            let _ = inline_hashes(html);
        }
    }

    #[test]
    fn policy_lists_hashes_and_never_unsafe_inline() {
        let hashes = InlineHashes { scripts: vec![h("a")], styles: vec![h("b")] };
        let policy = content_security_policy(&hashes);
        assert!(policy.starts_with("default-src 'none'; "));
        assert!(policy.contains(&format!("script-src 'self' '{}';", h("a"))));
        assert!(policy.contains(&format!("style-src 'self' '{}';", h("b"))));
        for directive in [
            "img-src 'self' data:",
            "connect-src 'self'",
            "font-src 'self'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(policy.contains(directive), "{directive}");
        }
        assert!(!policy.contains("unsafe"));
        assert!(!content_security_policy(&InlineHashes::default()).contains("unsafe"));
    }

    #[test]
    fn plausible_hashes() {
        assert!(!is_plausible_hash("sha256-"));
        assert!(!is_plausible_hash("'unsafe-inline'"));
        assert!(!is_plausible_hash("sha384-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="));
        assert!(!is_plausible_hash("sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuF'="));
    }
}
