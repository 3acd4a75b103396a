//! Provider snippets to plain text. Brave returns highlight markup and HTML
//! entities in `title` / `description` (`<strong>fjord</strong>`, `Q&amp;A`);
//! seed 001's results are text, so the API hands out text: tags dropped,
//! entities decoded, whitespace collapsed. The console renders it as text
//! either way; this is about showing the words, not about safety.

/// Tags out, entities decoded (after the tags, so `&lt;b&gt;` stays the text
/// `<b>`), control characters out, runs of whitespace to one space, trimmed.
pub fn plain_text(html: &str) -> String {
    let decoded = html_escape::decode_html_entities(&strip_tags(html)).into_owned();
    let mut out = String::with_capacity(decoded.len());
    for word in decoded.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// Drops tags, comments and the contents of `<script>` / `<style>`, the way
/// an HTML tokenizer sees them: `<` starts a tag only before a letter, `/`,
/// `!` or `?` (so `a < b` is text), and an unterminated tag runs to the end.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let starts_tag = after.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?'));
        if !starts_tag {
            out.push('<');
            rest = after;
            continue;
        }
        let end =
            if after.starts_with("!--") { after.find("-->").map(|i| i + 3) } else { after.find('>').map(|i| i + 1) };
        let Some(end) = end else { return out };
        let name: String =
            after.chars().take_while(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
        rest = &after[end..];
        // A tag boundary separates words (`a<br>b` reads "a b").
        out.push(' ');
        if name == "script" || name == "style" {
            let close = format!("</{name}");
            match rest.to_ascii_lowercase().find(&close) {
                Some(i) => rest = rest[i..].find('>').map_or("", |j| &rest[i + j + 1..]),
                None => return out,
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::plain_text;

    #[test]
    fn highlight_markup_and_entities_become_words() {
        // Real-shaped Brave fields.
        assert_eq!(plain_text("<strong>Fjord weather</strong> &amp; tides"), "Fjord weather & tides");
        assert_eq!(plain_text("Q&amp;A: what&#39;s &quot;hygge&quot;?"), "Q&A: what's \"hygge\"?");
        assert_eq!(plain_text("caf&eacute; &#x2014; &#8212; &hellip;"), "café — — …");
        assert_eq!(plain_text("Oslo <strong><em>nested</em></strong> tags"), "Oslo nested tags");
    }

    #[test]
    fn escaped_markup_stays_text() {
        assert_eq!(plain_text("use &lt;strong&gt; for bold"), "use <strong> for bold");
        assert_eq!(plain_text("&lt;script&gt;alert(1)&lt;/script&gt;"), "<script>alert(1)</script>");
    }

    #[test]
    fn scripts_styles_and_comments_are_dropped_whole() {
        assert_eq!(plain_text("a<script>alert(1)</script>b"), "a b");
        assert_eq!(plain_text("a<SCRIPT type=x>x<y</Script >b"), "a b");
        assert_eq!(plain_text("a<style>p{}</style>b<!-- <b>hidden</b> -->c"), "a b c");
        assert_eq!(plain_text("x<script>never closed"), "x");
    }

    #[test]
    fn broken_markup_never_leaks_a_tag_and_never_loses_plain_text() {
        assert_eq!(plain_text("1 < 2 and 3 > 2"), "1 < 2 and 3 > 2");
        assert_eq!(plain_text("unterminated <strong class=\"x"), "unterminated");
        assert_eq!(plain_text("a<br>b<br/>c"), "a b c");
        // What is not a complete, valid reference stays the text it is.
        assert_eq!(plain_text("&unknown; &amp &#xZZ; &#0; &#xD800;"), "&unknown; &amp &#xZZ; &#0; &#xD800;");
        assert_eq!(plain_text("  spaced \n\t out\u{0007}  "), "spaced out");
        assert_eq!(plain_text(""), "");
    }
}
