//! Content types by file extension, and which types are worth compressing.

/// What we know about a file from its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MediaType {
    /// Full `Content-Type` value (text types carry `; charset=utf-8`).
    pub content_type: &'static str,
    /// Text-like formats that brotli/gzip shrink; never already-compressed images or fonts.
    pub compressible: bool,
    pub is_html: bool,
}

const fn media(content_type: &'static str, compressible: bool) -> MediaType {
    MediaType { content_type, compressible, is_html: false }
}

const HTML: MediaType = MediaType { content_type: "text/html; charset=utf-8", compressible: true, is_html: true };

/// Anything we don't recognise: never sniffed (nosniff), never compressed.
pub const OCTET_STREAM: MediaType = media("application/octet-stream", false);

/// Media type of a file path, from its (case-insensitive) extension.
pub fn media_type_for(path: &str) -> MediaType {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    let Some((_, extension)) = file_name.rsplit_once('.') else {
        return OCTET_STREAM;
    };
    let extension = extension.to_ascii_lowercase();
    match extension.as_str() {
        "html" | "htm" => HTML,
        "css" => media("text/css; charset=utf-8", true),
        // RFC 9239: text/javascript is the one registered type for JS.
        "js" | "mjs" | "cjs" => media("text/javascript; charset=utf-8", true),
        // JSON has no charset parameter (RFC 8259 §11); it is always UTF-8.
        "json" | "map" => media("application/json", true),
        "webmanifest" => media("application/manifest+json", true),
        "txt" => media("text/plain; charset=utf-8", true),
        "md" => media("text/markdown; charset=utf-8", true),
        "csv" => media("text/csv; charset=utf-8", true),
        "xml" => media("application/xml", true),
        // RFC 9512: the OpenAPI document (static/openapi.yaml) among others.
        "yaml" | "yml" => media("application/yaml", true),
        "svg" => media("image/svg+xml", true),
        "wasm" => media("application/wasm", true),
        "png" => media("image/png", false),
        "jpg" | "jpeg" => media("image/jpeg", false),
        "gif" => media("image/gif", false),
        "webp" => media("image/webp", false),
        "avif" => media("image/avif", false),
        "ico" => media("image/x-icon", false),
        "woff2" => media("font/woff2", false),
        "woff" => media("font/woff", false),
        "pdf" => media("application/pdf", false),
        _ => OCTET_STREAM,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_types() {
        let cases = [
            ("index.html", "text/html; charset=utf-8"),
            ("x/y.css", "text/css; charset=utf-8"),
            ("app.js", "text/javascript; charset=utf-8"),
            ("mod.mjs", "text/javascript; charset=utf-8"),
            ("data.json", "application/json"),
            ("app.js.map", "application/json"),
            ("logo.svg", "image/svg+xml"),
            ("a.png", "image/png"),
            ("a.jpg", "image/jpeg"),
            ("a.jpeg", "image/jpeg"),
            ("a.gif", "image/gif"),
            ("a.webp", "image/webp"),
            ("favicon.ico", "image/x-icon"),
            ("f.woff2", "font/woff2"),
            ("robots.txt", "text/plain; charset=utf-8"),
            ("m.wasm", "application/wasm"),
            ("openapi.yaml", "application/yaml"),
            ("a.yml", "application/yaml"),
        ];
        for (path, expected) in cases {
            assert_eq!(media_type_for(path).content_type, expected, "{path}");
        }
    }

    #[test]
    fn extension_is_case_insensitive() {
        assert_eq!(media_type_for("INDEX.HTML"), media_type_for("index.html"));
        assert_eq!(media_type_for("A.PNG").content_type, "image/png");
    }

    #[test]
    fn unknown_or_missing_extension_is_octet_stream() {
        for path in ["LICENSE", "x/y.unknown", "archive.tar.zst", "dir.d/noext", "trailing."] {
            assert_eq!(media_type_for(path), OCTET_STREAM, "{path}");
        }
    }

    #[test]
    fn text_types_carry_charset() {
        for path in ["a.html", "a.css", "a.js", "a.txt"] {
            assert!(media_type_for(path).content_type.ends_with("; charset=utf-8"), "{path}");
        }
    }

    #[test]
    fn only_text_like_types_are_compressible() {
        for path in ["a.html", "a.css", "a.js", "a.json", "a.svg", "a.wasm", "a.map", "a.txt"] {
            assert!(media_type_for(path).compressible, "{path}");
        }
        for path in ["a.png", "a.jpg", "a.gif", "a.webp", "a.woff2", "a.woff", "a.ico", "a.bin"] {
            assert!(!media_type_for(path).compressible, "{path}");
        }
    }

    #[test]
    fn only_html_is_html() {
        assert!(media_type_for("a.html").is_html);
        assert!(media_type_for("a.htm").is_html);
        assert!(!media_type_for("a.svg").is_html);
        assert!(!media_type_for("a.html.br").is_html);
    }
}
