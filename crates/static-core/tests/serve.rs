//! The whole request path against real files: what the component will do.
#![cfg(feature = "precompress")]

mod common;

use std::io::Read;

use common::{app_css, index_html, make_site, TempDir, INDEX_SCRIPT, INDEX_STYLE};
use static_core::precompress::{embed_source, precompress_dir};
use static_core::{hash_source, serve, traversal_corpus, Embedded, EmbeddedFile, Reply, RequestHead, Site};

struct Fixture {
    _dir: TempDir,
    dir_path: std::path::PathBuf,
    site: Site,
}

fn fixture(precompressed: bool) -> Fixture {
    let dir = TempDir::new("serve");
    let site_root = make_site(&dir);
    let out = dir.join("pre");
    if precompressed {
        precompress_dir(&site_root, &out).unwrap();
    }
    Fixture { dir_path: dir.path().to_owned(), site: Site::new(site_root, out), _dir: dir }
}

fn get<'a>(path: &'a str) -> RequestHead<'a> {
    RequestHead { method: "GET", path, ..Default::default() }
}

fn header<'r>(reply: &'r Reply, name: &str) -> &'r str {
    reply.header(name).unwrap_or_else(|| panic!("missing {name}: {:?}", reply.headers))
}

fn body(reply: Reply) -> Vec<u8> {
    reply.into_body_bytes().unwrap()
}

fn brotli_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out).unwrap();
    out
}

fn gzip_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

fn assert_security_headers(reply: &Reply) {
    assert_eq!(reply.header("x-content-type-options"), Some("nosniff"), "{:?}", reply.headers);
    assert_eq!(reply.header("referrer-policy"), Some("no-referrer"), "{:?}", reply.headers);
}

fn assert_fixed_404(reply: Reply) {
    assert_eq!(reply.status, 404);
    assert_security_headers(&reply);
    assert_eq!(header(&reply, "content-type"), "application/json");
    assert_eq!(body(reply), br#"{"error_code":"not_found"}"#);
}

#[test]
fn root_serves_index_html_with_page_headers() {
    for precompressed in [true, false] {
        let f = fixture(precompressed);
        let reply = serve(&f.site, &get("/"));
        assert_eq!(reply.status, 200);
        assert_security_headers(&reply);
        assert_eq!(header(&reply, "content-type"), "text/html; charset=utf-8");
        assert_eq!(header(&reply, "cache-control"), "no-cache");
        assert_eq!(header(&reply, "vary"), "Accept-Encoding");
        assert_eq!(header(&reply, "x-frame-options"), "DENY");
        let csp = header(&reply, "content-security-policy").to_owned();
        assert!(csp.contains(&format!("'{}'", hash_source(INDEX_SCRIPT.as_bytes()))), "{csp}");
        assert!(csp.contains(&format!("style-src 'self' '{}'", hash_source(INDEX_STYLE.as_bytes()))), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        assert!(reply.header("content-encoding").is_none());
        let etag = header(&reply, "etag").to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        // The same content tag with or without the build step's sidecar.
        assert_eq!(etag, static_core::content_etag(index_html().as_bytes()));
        let len: usize = header(&reply, "content-length").parse().unwrap();
        let bytes = body(reply);
        assert_eq!(bytes.len(), len);
        assert_eq!(bytes, index_html().as_bytes());
        // /index.html is the same representation.
        assert_eq!(serve(&f.site, &get("/index.html")).header("etag"), Some(etag.as_str()));
    }
}

#[test]
fn nested_asset_with_its_own_type() {
    let f = fixture(true);
    let reply = serve(&f.site, &get("/x/y.css"));
    assert_eq!(reply.status, 200);
    assert_eq!(header(&reply, "content-type"), "text/css; charset=utf-8");
    assert_eq!(header(&reply, "cache-control"), "no-cache");
    assert!(reply.header("content-security-policy").is_none());
    assert!(reply.header("x-frame-options").is_none());
    assert_security_headers(&reply);
    assert_eq!(body(reply), app_css().as_bytes());
    let js = serve(&f.site, &get("/app.js"));
    assert_eq!(header(&js, "content-type"), "text/javascript; charset=utf-8");
}

#[test]
fn traversal_corpus_is_refused_with_a_fixed_404() {
    let f = fixture(true);
    for path in traversal_corpus() {
        for method in ["GET", "HEAD"] {
            let reply = serve(&f.site, &RequestHead { method, path: &path, ..Default::default() });
            assert_eq!(reply.status, 404, "{method} {path:?}");
            let bytes = body(reply);
            if method == "GET" {
                assert_eq!(bytes, br#"{"error_code":"not_found"}"#, "{path:?}");
            } else {
                assert!(bytes.is_empty());
            }
        }
    }
    // The secret outside the root really exists, so a 404 above was a refusal.
    assert!(f.dir_path.join("secret.txt").is_file());
}

#[test]
fn hidden_missing_and_directories_are_404() {
    let f = fixture(true);
    for path in ["/.env", "/missing.html", "/x", "/x/", "/emptydir", "/x/y.css/z", "/index.html/"] {
        assert_fixed_404(serve(&f.site, &get(path)));
    }
}

#[test]
fn other_methods_get_405_without_a_body_echo() {
    let f = fixture(true);
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "get", "BREW"] {
        let reply = serve(&f.site, &RequestHead { method, path: "/", ..Default::default() });
        assert_eq!(reply.status, 405, "{method}");
        assert_eq!(header(&reply, "allow"), "GET, HEAD");
        assert_security_headers(&reply);
        assert_eq!(body(reply), br#"{"error_code":"method_not_allowed"}"#);
    }
}

#[test]
fn head_has_get_headers_and_no_body() {
    for precompressed in [true, false] {
        let f = fixture(precompressed);
        for (path, accept) in [("/", None), ("/", Some("br")), ("/x/y.css", Some("gzip")), ("/logo.png", None)] {
            let get_reply =
                serve(&f.site, &RequestHead { method: "GET", path, accept_encoding: accept, ..Default::default() });
            let head_reply =
                serve(&f.site, &RequestHead { method: "HEAD", path, accept_encoding: accept, ..Default::default() });
            assert_eq!(get_reply.status, head_reply.status);
            assert_eq!(get_reply.headers, head_reply.headers, "{path} {accept:?}");
            let len: usize = header(&head_reply, "content-length").parse().unwrap();
            assert!(body(head_reply).is_empty());
            assert_eq!(body(get_reply).len(), len);
        }
    }
}

#[test]
fn negotiates_precompressed_variants() {
    let f = fixture(true);
    let req = |accept: &'static str| RequestHead {
        method: "GET",
        path: "/",
        accept_encoding: Some(accept),
        ..Default::default()
    };

    let br = serve(&f.site, &req("gzip, deflate, br"));
    assert_eq!(header(&br, "content-encoding"), "br");
    assert_eq!(header(&br, "vary"), "Accept-Encoding");
    let br_tag = header(&br, "etag").to_owned();
    assert!(br_tag.ends_with("-br\""), "{br_tag}");
    assert!(br.header("content-security-policy").is_some());
    let len: usize = header(&br, "content-length").parse().unwrap();
    let bytes = body(br);
    assert_eq!(bytes.len(), len);
    assert!(len < index_html().len());
    assert_eq!(brotli_decode(&bytes), index_html().as_bytes());

    let gz = serve(&f.site, &req("br;q=0, gzip"));
    assert_eq!(header(&gz, "content-encoding"), "gzip");
    let gz_tag = header(&gz, "etag").to_owned();
    assert!(gz_tag.ends_with("-gz\""), "{gz_tag}");
    assert_eq!(gzip_decode(&body(gz)), index_html().as_bytes());

    let identity = serve(&f.site, &req("br;q=0, gzip;q=0"));
    assert!(identity.header("content-encoding").is_none());
    assert_eq!(header(&identity, "vary"), "Accept-Encoding");
    let identity_tag = header(&identity, "etag").to_owned();
    assert_eq!(body(identity), index_html().as_bytes());

    assert_ne!(br_tag, gz_tag);
    assert_ne!(br_tag, identity_tag);
    assert_ne!(gz_tag, identity_tag);
}

#[test]
fn incompressible_types_are_never_coded_and_do_not_vary() {
    let f = fixture(true);
    let reply = serve(
        &f.site,
        &RequestHead { method: "GET", path: "/logo.png", accept_encoding: Some("br, gzip, *"), ..Default::default() },
    );
    assert_eq!(reply.status, 200);
    assert_eq!(header(&reply, "content-type"), "image/png");
    assert!(reply.header("content-encoding").is_none());
    assert!(reply.header("vary").is_none());
    assert!(!f.site.precompressed.join("logo.png.br").exists());
}

#[test]
fn tiny_files_have_no_variants_but_still_vary() {
    let f = fixture(true);
    let reply = serve(
        &f.site,
        &RequestHead { method: "GET", path: "/robots.txt", accept_encoding: Some("br"), ..Default::default() },
    );
    assert!(reply.header("content-encoding").is_none());
    assert_eq!(header(&reply, "vary"), "Accept-Encoding");
    assert_eq!(body(reply), b"x");
}

fn conditional<'a>(path: &'a str, accept: Option<&'a str>, inm: &'a str) -> RequestHead<'a> {
    RequestHead { method: "GET", path, accept_encoding: accept, if_none_match: Some(inm) }
}

#[test]
fn if_none_match_gives_304_with_validators_and_no_body() {
    for precompressed in [true, false] {
        let f = fixture(precompressed);
        let first = serve(
            &f.site,
            &RequestHead { method: "GET", path: "/", accept_encoding: Some("br"), ..Default::default() },
        );
        let etag = header(&first, "etag").to_owned();
        for inm in [etag.clone(), format!("W/{etag}"), format!("\"nope\", {etag}"), "*".to_owned()] {
            let reply = serve(&f.site, &conditional("/", Some("br"), &inm));
            assert_eq!(reply.status, 304, "{inm}");
            assert_eq!(header(&reply, "etag"), etag);
            assert_eq!(header(&reply, "cache-control"), "no-cache");
            assert_eq!(header(&reply, "vary"), "Accept-Encoding");
            assert_security_headers(&reply);
            assert!(reply.header("content-length").is_none());
            assert!(body(reply).is_empty());
        }
        let miss = serve(&f.site, &conditional("/", Some("br"), "\"nope\""));
        assert_eq!(miss.status, 200);
        // HEAD revalidates too.
        let head = serve(&f.site, &RequestHead { method: "HEAD", ..conditional("/", Some("br"), &etag) });
        assert_eq!(head.status, 304);
    }
}

#[test]
fn a_variant_tag_does_not_validate_another_coding() {
    let f = fixture(true);
    let br =
        serve(&f.site, &RequestHead { method: "GET", path: "/", accept_encoding: Some("br"), ..Default::default() });
    let br_tag = header(&br, "etag").to_owned();
    assert_eq!(serve(&f.site, &conditional("/", Some("br"), &br_tag)).status, 304);
    assert_eq!(serve(&f.site, &conditional("/", Some("gzip"), &br_tag)).status, 200);
    assert_eq!(serve(&f.site, &conditional("/", None, &br_tag)).status, 200);
}

#[test]
fn if_none_match_on_missing_file_is_still_404() {
    let f = fixture(true);
    assert_eq!(serve(&f.site, &conditional("/missing.css", None, "*")).status, 404);
}

#[test]
fn stale_sidecar_serves_identity_with_content_etag_and_fresh_csp() {
    let f = fixture(true);
    let fresh =
        serve(&f.site, &RequestHead { method: "GET", path: "/", accept_encoding: Some("br"), ..Default::default() });
    assert_eq!(header(&fresh, "content-encoding"), "br");

    // An operator edits the page in place without rebuilding.
    let edited_script = "document.title = 'edited';";
    let edited = index_html().replace(INDEX_SCRIPT, edited_script);
    std::fs::write(f.site.root.join("index.html"), &edited).unwrap();
    let reply = serve(
        &f.site,
        &RequestHead { method: "GET", path: "/", accept_encoding: Some("br, gzip"), ..Default::default() },
    );
    assert_eq!(reply.status, 200);
    assert!(reply.header("content-encoding").is_none(), "{:?}", reply.headers);
    assert_eq!(header(&reply, "vary"), "Accept-Encoding");
    let etag = header(&reply, "etag").to_owned();
    assert_eq!(etag, static_core::content_etag(edited.as_bytes()));
    let csp = header(&reply, "content-security-policy");
    assert!(csp.contains(&hash_source(edited_script.as_bytes())), "{csp}");
    assert!(!csp.contains(&hash_source(INDEX_SCRIPT.as_bytes())), "{csp}");
    assert_eq!(body(reply), edited.as_bytes());

    // Same size and mtime, different content: still stale.
    let css = f.site.root.join("x/y.css");
    let before = serve(&f.site, &get("/x/y.css"));
    let before_tag = header(&before, "etag").to_owned();
    let meta = std::fs::metadata(&css).unwrap();
    let mut text = std::fs::read(&css).unwrap();
    text[0] ^= 0x20;
    std::fs::write(&css, &text).unwrap();
    let file = std::fs::File::options().write(true).open(&css).unwrap();
    file.set_modified(meta.modified().unwrap()).unwrap();
    let br = RequestHead { method: "GET", path: "/x/y.css", accept_encoding: Some("br"), ..Default::default() };
    let after = serve(&f.site, &br);
    assert!(after.header("content-encoding").is_none());
    assert_ne!(header(&after, "etag"), before_tag);
    assert_eq!(body(after), text);

    // A 304 on a stale page still carries the page's current CSP.
    let not_modified = serve(&f.site, &conditional("/", None, &etag));
    assert_eq!(not_modified.status, 304);
    assert!(header(&not_modified, "content-security-policy").contains(&hash_source(edited_script.as_bytes())));
    assert_eq!(header(&not_modified, "x-frame-options"), "DENY");
}

#[test]
fn a_copy_with_new_mtimes_keeps_every_variant_and_tag() {
    // What `spin up` does by default: the files are copied at start-up, so every
    // mtime is new while every byte is the same.
    let f = fixture(true);
    let br = |path| RequestHead { method: "GET", path, accept_encoding: Some("br, gzip"), ..Default::default() };
    let before: Vec<_> = ["/", "/x/y.css", "/app.js", "/logo.png"]
        .iter()
        .map(|p| {
            let r = serve(&f.site, &br(p));
            (r.header("etag").map(str::to_owned), r.header("content-encoding").map(str::to_owned))
        })
        .collect();
    assert_eq!(before[0].1.as_deref(), Some("br"));
    for dir in [&f.site.root, &f.site.precompressed] {
        for entry in walk(dir) {
            let file = std::fs::File::options().write(true).open(&entry).unwrap();
            file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(3600)).unwrap();
        }
    }
    let after: Vec<_> = ["/", "/x/y.css", "/app.js", "/logo.png"]
        .iter()
        .map(|p| {
            let r = serve(&f.site, &br(p));
            (r.header("etag").map(str::to_owned), r.header("content-encoding").map(str::to_owned))
        })
        .collect();
    assert_eq!(before, after);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn missing_precompressed_dir_still_serves_everything() {
    let f = fixture(false);
    assert!(!f.site.precompressed.exists());
    for path in ["/", "/x/y.css", "/app.js", "/logo.png"] {
        let reply = serve(
            &f.site,
            &RequestHead { method: "GET", path, accept_encoding: Some("br, gzip"), ..Default::default() },
        );
        assert_eq!(reply.status, 200, "{path}");
        assert!(reply.header("content-encoding").is_none());
    }
}

#[test]
fn a_damaged_variant_falls_back_to_identity() {
    let f = fixture(true);
    std::fs::write(f.site.precompressed.join("index.html.br"), b"truncated").unwrap();
    let reply =
        serve(&f.site, &RequestHead { method: "GET", path: "/", accept_encoding: Some("br"), ..Default::default() });
    assert!(reply.header("content-encoding").is_none());
    let etag = header(&reply, "etag").to_owned();
    assert_eq!(etag, static_core::content_etag(index_html().as_bytes()));
    assert_eq!(body(reply), index_html().as_bytes());

    std::fs::remove_file(f.site.precompressed.join("index.html.br")).unwrap();
    let reply = serve(
        &f.site,
        &RequestHead { method: "GET", path: "/", accept_encoding: Some("br, gzip"), ..Default::default() },
    );
    assert_eq!(header(&reply, "content-encoding"), "gzip");
}

#[test]
fn a_tampered_sidecar_is_ignored() {
    let f = fixture(true);
    let meta = f.site.precompressed.join("x/y.css.meta.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    let etag_line = text.lines().find(|l| l.contains("\"etag\"")).unwrap();
    std::fs::write(&meta, text.replace(etag_line, r#"  "etag": "\"x\r\nset-cookie: a=b\"","#)).unwrap();
    let reply = serve(
        &f.site,
        &RequestHead { method: "GET", path: "/x/y.css", accept_encoding: Some("br"), ..Default::default() },
    );
    assert_eq!(reply.status, 200);
    assert_eq!(header(&reply, "etag"), static_core::content_etag(&std::fs::read(f.site.root.join("x/y.css")).unwrap()));
    assert!(reply.header("content-encoding").is_none());

    std::fs::write(&meta, b"not json").unwrap();
    assert_eq!(serve(&f.site, &get("/x/y.css")).status, 200);
}

#[test]
fn error_bodies_never_echo_the_path() {
    let f = fixture(true);
    for path in ["/<script>alert(1)</script>", "/missing-%3Cscript%3E.html", "/a%0d%0aX: y"] {
        let reply = serve(&f.site, &get(path));
        assert_eq!(reply.status, 404);
        let text = String::from_utf8(body(reply)).unwrap();
        assert!(!text.contains("script") && !text.contains("missing"), "{text}");
    }
}

/// Small files and variants are read whole (few file-system calls in Spin);
/// larger ones stream from the open file, with the same content tag.
#[test]
fn small_bodies_are_read_whole_and_large_ones_stream() {
    use static_core::{content_etag, ReplyBody, WHOLE_FILE_LIMIT};
    let dir = TempDir::new("sizes");
    let large: Vec<u8> = (0..WHOLE_FILE_LIMIT as usize + 4096).map(|i| b"abcdefghij\n"[i % 11]).collect();
    dir.write("site/big.txt", &large);
    dir.write("site/small.txt", "small and plain\n".repeat(100));
    precompress_dir(&dir.join("site"), &dir.join("pre")).unwrap();
    let site = Site::new(dir.join("site"), dir.join("pre"));

    let big = serve(&site, &get("/big.txt"));
    assert!(matches!(big.body, ReplyBody::File { len, .. } if len == large.len() as u64));
    assert_eq!(header(&big, "etag"), content_etag(&large));
    assert_eq!(body(big), large);

    let small = serve(&site, &get("/small.txt"));
    assert!(matches!(small.body, ReplyBody::Bytes(_)));
    let br = serve(&site, &RequestHead { accept_encoding: Some("br"), ..get("/small.txt") });
    assert_eq!(header(&br, "content-encoding"), "br");
    assert!(matches!(br.body, ReplyBody::Bytes(_)), "a small variant is read whole too");
    assert_eq!(brotli_decode(&body(br)), "small and plain\n".repeat(100).into_bytes());
}

/// The site as a component's build script builds it in: the files
/// `embed_source` names, read and kept for the test's life.
fn embedded(site: &Site) -> Embedded {
    let source = embed_source(&site.root, &site.precompressed).unwrap();
    let include = |field: &str| -> Option<&'static [u8]> {
        let path = field.split("include_bytes!(\"").nth(1)?.split("\")").next()?;
        Some(Vec::leak(std::fs::read(path).unwrap()))
    };
    let mut files = Vec::new();
    for line in source.lines().filter(|l| l.starts_with("static_core::EmbeddedFile {")) {
        let field = |name: &str| line.split(&format!(" {name}: ")).nth(1).unwrap().split(", ").next().unwrap();
        files.push(EmbeddedFile {
            rel: String::leak(field("rel").trim_matches('"').to_string()),
            bytes: include(field("bytes")).unwrap(),
            sidecar: include(field("sidecar")),
            brotli: include(field("brotli")),
            gzip: include(field("gzip").trim_end_matches(" },")),
        });
    }
    Embedded(Vec::leak(files))
}

#[test]
fn a_built_in_site_answers_exactly_as_its_mounted_files() {
    let f = fixture(true);
    let built_in = embedded(&f.site);
    let rels: Vec<&str> = built_in.0.iter().map(|e| e.rel).collect();
    assert_eq!(rels, ["app.js", "index.html", "logo.png", "robots.txt", "x/y.css"], "sorted, hidden files left out");
    assert!(built_in.0[1].brotli.is_some() && built_in.0[2].brotli.is_none(), "variants only where they save bytes");
    let paths = ["/", "/index.html", "/x/y.css", "/app.js", "/logo.png", "/robots.txt", "/.env", "/emptydir", "/nope"];
    let accepts = [None, Some("br"), Some("gzip, br;q=0.5"), Some("br;q=0, gzip;q=0")];
    for path in paths.into_iter().chain(traversal_corpus().iter().map(String::as_str)) {
        for method in ["GET", "HEAD", "POST"] {
            for accept_encoding in accepts {
                let head = RequestHead { method, path, accept_encoding, if_none_match: None };
                let (mounted, built) = (serve(&f.site, &head), serve(&built_in, &head));
                assert_eq!((mounted.status, &mounted.headers), (built.status, &built.headers), "{method} {path}");
                let etag = mounted.header("etag").map(str::to_owned);
                assert_eq!(body(mounted), body(built), "{method} {path} {accept_encoding:?}");
                if let Some(etag) = etag {
                    let head = RequestHead { if_none_match: Some(&etag), ..head };
                    let (mounted, built) = (serve(&f.site, &head), serve(&built_in, &head));
                    assert_eq!((mounted.status, &mounted.headers), (built.status, &built.headers), "{path} 304");
                }
            }
        }
    }
}
