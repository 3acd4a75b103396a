//! The static-file component through the real host and .wasm, as spin.toml runs it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use component_tests::*;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NOT_FOUND_BODY: &str = r#"{"error_code":"not_found"}"#;

/// Text that only files outside static/ contain: none may ever reach a response.
const OUTSIDE_CANARIES: &[&str] = &[
    "[workspace]",           // Cargo.toml
    "[package]",             // any crate's Cargo.toml
    "spin_manifest_version", // spin.toml
    "root:",                 // /etc/passwd
    "\"variants\"",          // a precompress sidecar
    "[[trigger.http]]",
];

async fn site() -> TestApp {
    require_wasm("static_files.wasm");
    require_wasm("simulator.wasm");
    TestApp::start(TestAppOptions::new(repo_root().join("spin.toml"))).await.expect("spin.toml boots")
}

fn index_html() -> Vec<u8> {
    std::fs::read(repo_root().join("static/index.html")).expect("static/index.html")
}

/// The CSP sources of a page's inline `<script>` elements (those without `src`; the
/// console has none, its code is modules), computed independently of static-core:
/// base64 SHA-256 of each body, CRLF normalised to LF.
fn inline_script_sources(html: &[u8]) -> Vec<String> {
    let html = std::str::from_utf8(html).expect("index.html is UTF-8");
    let lower = html.to_ascii_lowercase();
    let mut sources = Vec::new();
    let mut at = 0;
    while let Some(open) = lower[at..].find("<script").map(|i| at + i) {
        let tag_end = open + lower[open..].find('>').expect("a closed <script> tag") + 1;
        let body_end = tag_end + lower[tag_end..].find("</script").expect("a </script>");
        let tag = &lower[open..tag_end];
        if !tag.contains(" src=") && !tag.contains(" src ") {
            let body = html[tag_end..body_end].replace("\r\n", "\n");
            let digest = Sha256::digest(body.as_bytes());
            let source = format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(digest));
            if !sources.contains(&source) {
                sources.push(source);
            }
        }
        at = body_end;
    }
    sources
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> &'a str {
    response.headers().get(name).unwrap_or_else(|| panic!("no {name} header")).to_str().unwrap()
}

/// `script-src` of a CSP, asserting it allows inline code by hash only.
fn script_src(csp: &str) -> Vec<String> {
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
    let directive = csp
        .split(';')
        .map(str::trim)
        .find(|d| d.starts_with("script-src "))
        .unwrap_or_else(|| panic!("no script-src in {csp}"));
    directive.split_whitespace().skip(1).map(str::to_owned).collect()
}

fn assert_csp_allows_script(csp: &str, source: &str) {
    let sources = script_src(csp);
    assert!(sources.iter().any(|s| s.starts_with("'sha256-")), "{csp}");
    assert!(sources.contains(&format!("'{source}'")), "script-src lacks '{source}': {csp}");
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut request = client().get(app.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap()
}

fn brotli_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out).expect("valid brotli");
    out
}

fn gzip_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).expect("valid gzip");
    out
}

/// A response read off a raw socket.
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Sends `GET <target> HTTP/1.1` byte for byte, so no client library normalises the path.
async fn raw_get(app: &TestApp, target: &str) -> RawResponse {
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .unwrap_or_else(|_| panic!("{target}: no complete response in 10 s"))
        .unwrap();
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{target}: no response head in {:?}", String::from_utf8_lossy(&bytes)));
    let head = String::from_utf8(bytes[..split].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect(status_line);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = bytes[split + 4..].to_vec();
    if headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked")) {
        body = dechunk(&body);
    }
    RawResponse { status, headers, body }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size_text = std::str::from_utf8(&raw[..line_end]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        raw = &raw[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// Our own attacks on top of static-core's corpus, aimed at files that do exist just
/// outside the site: the manifest, the workspace, the precompressed variants and sidecars.
const EXTRA_ATTACKS: &[&str] = &[
    "/../spin.toml",
    "/%2e%2e/spin.toml",
    "/%2E%2E/Cargo.toml",
    "/..%2fspin.toml",
    "/..%2FCargo.toml",
    "/x/..%2f..%2fspin.toml",
    "/..%5cspin.toml",
    "/%5c..%5cspin.toml",
    "/..%5c..%5cCargo.toml",
    "/%2e%2e%2fCargo.toml",
    "/%2e%2e%5cCargo.toml",
    "/%2e%2e/target/static-precompressed/index.html.meta.json",
    "/../target/static-precompressed/index.html.br",
    "/..%2ftarget%2fstatic-precompressed%2findex.html.meta.json",
    "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/%c0%af..%c0%afspin.toml",
    "/%c0%ae%c0%ae/spin.toml",
    "/%c0%ae%c0%ae%c0%afCargo.toml",
    "/%e0%80%af../Cargo.toml",
    "/index.html%00",
    "/index.html%00.js",
    "/spin.toml%00.html",
    "/%00/../spin.toml",
    "/index.html%2500",
    "/%252e%252e%252fspin.toml",
    // The mounts are siblings inside the guest: the site must not reach the other one.
    "/../precompressed/index.html.meta.json",
    "/%2e%2e/precompressed/index.html.br",
    "/..%2fprecompressed%2findex.html.gz",
    // Names that exist only in the precompressed mount, asked for on the site.
    "/index.html.br",
    "/index.html.gz",
    "/index.html.meta.json",
    "/precompressed/index.html.br",
    "/site/index.html",
    // Case and trailing tricks on the one real file.
    "/index.html/",
    "/index.html/.",
    "/index.html::$DATA",
    "/INDEX.HTML%20",
    "/index.html%20",
    "/index.html;.js",
];

/// Request targets sent in absolute-form: the path inside is just as untrusted.
const ABSOLUTE_FORM_ATTACKS: &[&str] =
    &["http://localhost/../spin.toml", "http://localhost/%2e%2e/Cargo.toml", "http://localhost/..%2fspin.toml"];

fn assert_refused(target: &str, response: &RawResponse) {
    let body = String::from_utf8_lossy(&response.body);
    match response.status {
        404 => {
            assert_eq!(body, NOT_FOUND_BODY, "{target}: 404 body");
            assert_eq!(response.header("content-type"), Some("application/json"), "{target}");
            assert_eq!(response.header("x-content-type-options"), Some("nosniff"), "{target}");
        }
        400 => assert!(body.is_empty(), "{target}: the host's 400 has no body, got {body:?}"),
        other => panic!("{target}: status {other}, body {body:?}"),
    }
    assert!(!body.contains(target), "{target}: body echoes the path: {body:?}");
    for canary in OUTSIDE_CANARIES {
        assert!(!body.contains(canary), "{target}: body has {canary:?}: {body:?}");
    }
    assert!(!body.contains("<html"), "{target}: served a page: {body:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn traversal_corpus_is_refused_over_a_raw_socket() {
    let app = site().await;
    // The raw client itself works: the root is served.
    let root = raw_get(&app, "/").await;
    assert_eq!(root.status, 200);
    assert_eq!(root.body, index_html());

    let corpus = static_core::traversal_corpus();
    assert!(corpus.len() >= 30, "corpus has only {} entries", corpus.len());
    let mut host_rejected = Vec::new();
    for target in corpus.iter().map(String::as_str).chain(EXTRA_ATTACKS.iter().copied()) {
        let response = raw_get(&app, target).await;
        assert_refused(target, &response);
        if response.status == 400 {
            host_rejected.push(target.to_owned());
        }
    }
    // Every corpus entry is a valid origin-form target (static-core checks that), so the
    // host parses all of them and the component itself refuses each with its 404.
    assert!(host_rejected.is_empty(), "rejected by the host before the component: {host_rejected:?}");

    for target in ABSOLUTE_FORM_ATTACKS {
        let response = raw_get(&app, target).await;
        assert_refused(target, &response);
    }
    // Raw bytes outside the corpus's wire-safe set. The host's parser (httparse, then
    // http::Uri) answers 400 by itself for '<', DEL, NUL and a space inside the target,
    // without involving the component; it lets '"' and '{' through, and the component
    // refuses those (characters never used in asset names) with its own 404.
    for (target, expected) in [
        ("/a\"b.html", 404),
        ("/{x}.css", 404),
        ("/<script>.html", 400),
        ("/index.html\x7f", 400),
        ("/index.html\0", 400),
        ("/a b.css", 400),
    ] {
        let response = raw_get(&app, target).await;
        assert_eq!(response.status, expected, "{target:?}");
        assert_refused(target, &response);
    }
    // The component was reached for the corpus: one 404 log line per refused request.
    if host_only("counts the host's request log lines (Spin logs no requests)") {
        return;
    }
    let log = app.log();
    let refused = log.lines().filter(|l| l.starts_with("GET ") && l.contains(" -> static-files 404 ")).count();
    assert!(refused >= corpus.len() + EXTRA_ATTACKS.len(), "only {refused} component 404s logged:\n{log}");
}

/// Spin keeps a client's own `spin-path-info` and appends its value after it: the
/// component serves by Spin's (the last), so a forged copy neither steers nor breaks it.
#[tokio::test(flavor = "multi_thread")]
async fn a_clients_spin_path_info_never_steers_the_component() {
    let app = site().await;
    for forged in ["/../../Cargo.toml", "/missing.css", "/index.html"] {
        let response = get(&app, "/", &[("spin-path-info", forged)]).await;
        assert_eq!(response.status(), 200, "{forged}");
        assert_eq!(response.bytes().await.unwrap(), index_html(), "{forged}");
        let missing = get(&app, "/missing.css", &[("spin-path-info", forged)]).await;
        assert_eq!(missing.status(), 404, "{forged}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_carries_hardened_headers_and_a_hash_only_csp() {
    let app = site().await;
    let response = get(&app, "/", &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-type"), "text/html; charset=utf-8");
    let etag = header(&response, "etag");
    assert!(etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'), "strong quoted ETag: {etag}");
    assert!(!etag[1..etag.len() - 1].contains('"'), "{etag}");
    assert_eq!(header(&response, "cache-control"), "no-cache");
    assert_eq!(header(&response, "x-content-type-options"), "nosniff");
    assert_eq!(header(&response, "referrer-policy"), "no-referrer");
    assert_eq!(header(&response, "x-frame-options"), "DENY");
    assert_eq!(header(&response, "vary"), "Accept-Encoding");
    assert!(response.headers().get("content-encoding").is_none());

    let csp = header(&response, "content-security-policy").to_owned();
    let html = index_html();
    let sources = inline_script_sources(&html);
    for source in &sources {
        assert_csp_allows_script(&csp, source);
    }
    let hashes: Vec<_> = script_src(&csp).into_iter().filter(|s| s.starts_with("'sha256-")).collect();
    assert_eq!(hashes.len(), sources.len(), "one hash per inline script, no others: {csp}");
    // Besides those hashes only the site's own files (the console's modules) may run.
    assert!(script_src(&csp).iter().all(|s| s == "'self'" || s.starts_with("'sha256-")), "{csp}");
    for directive in ["default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'"] {
        assert!(csp.split(';').any(|d| d.trim() == directive), "{directive} missing: {csp}");
    }
    // The inline <style> is allowed by hash too, never by 'unsafe-inline'.
    let style_src = csp.split(';').map(str::trim).find(|d| d.starts_with("style-src ")).expect("style-src");
    if html.windows(7).any(|w| w.eq_ignore_ascii_case(b"<style>")) {
        assert!(style_src.contains("'sha256-"), "{style_src}");
    }

    assert_eq!(response.bytes().await.unwrap(), html);
}

#[tokio::test(flavor = "multi_thread")]
async fn precompressed_variants_are_negotiated_and_tagged_apart() {
    let app = site().await;
    let html = index_html();

    let br = get(&app, "/", &[("accept-encoding", "br")]).await;
    assert_eq!(br.status(), 200);
    assert_eq!(
        br.headers().get("content-encoding").map(|v| v.to_str().unwrap()),
        Some("br"),
        "no brotli variant: is target/static-precompressed stale? (scripts/test.sh runs precompress)"
    );
    assert_eq!(header(&br, "vary"), "Accept-Encoding");
    assert_eq!(header(&br, "content-type"), "text/html; charset=utf-8");
    let br_etag = header(&br, "etag").to_owned();
    let br_csp = header(&br, "content-security-policy").to_owned();
    let br_body = br.bytes().await.unwrap();
    assert!(br_body.len() < html.len(), "the brotli variant is smaller");
    assert_eq!(brotli_decode(&br_body), html);

    let gzip = get(&app, "/", &[("accept-encoding", "br;q=0, gzip")]).await;
    assert_eq!(gzip.status(), 200);
    assert_eq!(header(&gzip, "content-encoding"), "gzip");
    assert_eq!(header(&gzip, "vary"), "Accept-Encoding");
    let gzip_etag = header(&gzip, "etag").to_owned();
    assert_eq!(header(&gzip, "content-security-policy"), br_csp);
    assert_eq!(gzip_decode(&gzip.bytes().await.unwrap()), html);

    let identity = get(&app, "/", &[("accept-encoding", "identity")]).await;
    assert_eq!(identity.status(), 200);
    assert!(identity.headers().get("content-encoding").is_none());
    assert_eq!(header(&identity, "vary"), "Accept-Encoding");
    let identity_etag = header(&identity, "etag").to_owned();
    assert_eq!(header(&identity, "content-security-policy"), br_csp);
    assert_eq!(identity.bytes().await.unwrap(), html);

    let plain = get(&app, "/", &[]).await;
    assert!(plain.headers().get("content-encoding").is_none(), "no Accept-Encoding: identity");
    assert_eq!(header(&plain, "etag"), identity_etag);
    assert_eq!(plain.bytes().await.unwrap(), html);

    assert_ne!(br_etag, gzip_etag);
    assert_ne!(br_etag, identity_etag);
    assert_ne!(gzip_etag, identity_etag);
    // Ties prefer brotli; an unknown coding alone gets identity.
    let both = get(&app, "/", &[("accept-encoding", "gzip, br")]).await;
    assert_eq!(header(&both, "content-encoding"), "br");
    assert_eq!(header(&both, "etag"), br_etag);
    let unknown = get(&app, "/", &[("accept-encoding", "zstd")]).await;
    assert!(unknown.headers().get("content-encoding").is_none());
    assert_eq!(header(&unknown, "etag"), identity_etag);
}

#[tokio::test(flavor = "multi_thread")]
async fn if_none_match_revalidates_with_304() {
    let app = site().await;
    let first = get(&app, "/", &[]).await;
    let etag = header(&first, "etag").to_owned();
    let csp = header(&first, "content-security-policy").to_owned();
    let inner = &etag[1..etag.len() - 1];

    let weak = format!("W/{etag}");
    let listed = format!("\"nope-1\", {etag}, \"nope-2\"");
    for value in [etag.as_str(), listed.as_str(), weak.as_str(), "*"] {
        let response = get(&app, "/", &[("if-none-match", value)]).await;
        assert_eq!(response.status(), 304, "If-None-Match: {value}");
        assert_eq!(header(&response, "etag"), etag, "{value}");
        assert_eq!(header(&response, "vary"), "Accept-Encoding", "{value}");
        assert_eq!(header(&response, "cache-control"), "no-cache", "{value}");
        assert_eq!(header(&response, "content-security-policy"), csp, "{value}");
        assert!(response.bytes().await.unwrap().is_empty(), "304 has no body ({value})");
    }

    let near_misses = [
        "\"nope\"".to_owned(),
        inner.to_owned(), // unquoted
        format!("\"{inner}x\""),
        format!("\"{inner}-br\""),
    ];
    for value in &near_misses {
        let response = get(&app, "/", &[("if-none-match", value.as_str())]).await;
        assert_eq!(response.status(), 200, "If-None-Match: {value}");
        assert_eq!(response.bytes().await.unwrap(), index_html());
    }

    // Each coding is its own representation: the identity tag does not validate br.
    let br = get(&app, "/", &[("accept-encoding", "br"), ("if-none-match", etag.as_str())]).await;
    assert_eq!(br.status(), 200);
    assert_eq!(header(&br, "content-encoding"), "br");
    let br_etag = header(&br, "etag").to_owned();
    let br_again = get(&app, "/", &[("accept-encoding", "br"), ("if-none-match", br_etag.as_str())]).await;
    assert_eq!(br_again.status(), 304);
    assert_eq!(header(&br_again, "etag"), br_etag);
    assert!(br_again.bytes().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn head_mirrors_get_and_other_methods_are_405() {
    let app = site().await;
    for accept_encoding in ["identity", "br"] {
        let get = client().get(app.url("/")).header("accept-encoding", accept_encoding).send().await.unwrap();
        let head = client().head(app.url("/")).header("accept-encoding", accept_encoding).send().await.unwrap();
        assert_eq!(head.status(), get.status());
        let without_date = |r: &reqwest::Response| {
            let mut h: Vec<(String, String)> = r
                .headers()
                .iter()
                .filter(|(n, _)| *n != "date")
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
                .collect();
            h.sort();
            h
        };
        assert_eq!(without_date(&head), without_date(&get), "HEAD headers == GET headers ({accept_encoding})");
        let length: usize = header(&head, "content-length").parse().unwrap();
        assert_eq!(get.bytes().await.unwrap().len(), length);
        assert!(head.bytes().await.unwrap().is_empty());
    }
    // HEAD of a missing file: the 404's headers, no body.
    let head_missing = client().head(app.url("/no-such-file-zq81.js")).send().await.unwrap();
    assert_eq!(head_missing.status(), 404);
    assert!(head_missing.bytes().await.unwrap().is_empty());

    for method in [reqwest::Method::POST, reqwest::Method::PUT, reqwest::Method::DELETE, reqwest::Method::PATCH] {
        for path in ["/", "/index.html", "/no-such-file-zq81.js"] {
            let response = client().request(method.clone(), app.url(path)).body("x=1").send().await.unwrap();
            assert_eq!(response.status(), 405, "{method} {path}");
            assert_eq!(header(&response, "allow"), "GET, HEAD", "{method} {path}");
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
            let body = response.text().await.unwrap();
            assert!(!body.contains("<html") && !body.contains("zq81"), "{method} {path}: {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_files_are_a_plain_404_that_does_not_echo_the_path() {
    let app = site().await;
    for path in ["/no-such-file-zq81.js", "/deep/no-such-dir-zq81/file.css", "/no-such-file-zq81"] {
        let response = get(&app, path, &[("accept-encoding", "br, gzip")]).await;
        assert_eq!(response.status(), 404, "{path}");
        assert_eq!(header(&response, "content-type"), "application/json");
        assert_eq!(header(&response, "cache-control"), "no-store");
        assert_eq!(header(&response, "x-content-type-options"), "nosniff");
        assert!(response.headers().get("etag").is_none());
        assert!(response.headers().get("content-encoding").is_none());
        let body = response.text().await.unwrap();
        assert_eq!(body, NOT_FOUND_BODY);
        assert!(!body.contains("zq81"));
    }
    // The log names the path (it is the operator's log) but never the query.
    get(&app, "/no-such-file-zq81.js?token=query-canary-x4", &[]).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!app.log().contains("query-canary-x4"));
}

#[tokio::test(flavor = "multi_thread")]
async fn root_and_index_html_are_the_same_representation() {
    let app = site().await;
    for accept_encoding in ["identity", "br", "gzip"] {
        let root = get(&app, "/", &[("accept-encoding", accept_encoding)]).await;
        let index = get(&app, "/index.html", &[("accept-encoding", accept_encoding)]).await;
        assert_eq!(root.status(), 200);
        assert_eq!(index.status(), 200);
        for name in ["content-type", "etag", "content-security-policy", "vary", "content-length"] {
            assert_eq!(header(&root, name), header(&index, name), "{name} ({accept_encoding})");
        }
        assert_eq!(header(&index, "content-type"), "text/html; charset=utf-8");
        assert_eq!(
            root.headers().get("content-encoding"),
            index.headers().get("content-encoding"),
            "{accept_encoding}"
        );
        assert_eq!(root.bytes().await.unwrap(), index.bytes().await.unwrap());
    }
    // The ETag of / validates /index.html: the same representation.
    let etag = header(&get(&app, "/", &[]).await, "etag").to_owned();
    let revalidated = get(&app, "/index.html", &[("if-none-match", etag.as_str())]).await;
    assert_eq!(revalidated.status(), 304);
    // A query never becomes part of the file name.
    for path in ["/?x=1", "/index.html?v=2", "/index.html?../../Cargo.toml"] {
        let response = get(&app, path, &[]).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(header(&response, "etag"), etag, "{path}");
    }
    // Harmless percent-encoding names the same file once decoded.
    let encoded = get(&app, "/%69ndex%2ehtml", &[]).await;
    assert_eq!(encoded.status(), 200);
    assert_eq!(header(&encoded, "etag"), etag);
}

/// The console's ES modules (static/js/, a subdirectory of the mount): JavaScript for
/// the browser's module loader (which insists on a JavaScript type, and nosniff holds
/// it to that), precompressed like the page, each coding with its own strong tag.
#[tokio::test(flavor = "multi_thread")]
async fn the_console_modules_are_javascript_precompressed_with_strong_etags() {
    let app = site().await;
    let mut modules: Vec<_> = std::fs::read_dir(repo_root().join("static/js"))
        .expect("static/js")
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".js"))
        .collect();
    modules.sort();
    assert!(modules.iter().any(|name| name == "main.js"), "{modules:?}");
    for name in &modules {
        let path = format!("/js/{name}");
        let source = std::fs::read(repo_root().join("static/js").join(name)).unwrap();

        let br = get(&app, &path, &[("accept-encoding", "gzip, br")]).await;
        assert_eq!(br.status(), 200, "{path}");
        assert_eq!(header(&br, "content-type"), "text/javascript; charset=utf-8", "{path}");
        assert_eq!(
            br.headers().get("content-encoding").map(|v| v.to_str().unwrap()),
            Some("br"),
            "{path}: no brotli variant: is target/static-precompressed stale? (scripts/test.sh runs precompress)"
        );
        assert_eq!(header(&br, "vary"), "Accept-Encoding", "{path}");
        assert_eq!(header(&br, "cache-control"), "no-cache", "{path}");
        assert_eq!(header(&br, "x-content-type-options"), "nosniff", "{path}");
        let br_etag = header(&br, "etag").to_owned();
        assert!(
            br_etag.len() > 2 && br_etag.starts_with('"') && br_etag.ends_with('"'),
            "{path}: strong quoted ETag: {br_etag}"
        );
        assert_eq!(
            br_etag,
            static_core::variant_etag(&static_core::content_etag(&source), static_core::Encoding::Brotli),
            "{path}"
        );
        let br_body = br.bytes().await.unwrap();
        assert!(br_body.len() < source.len(), "{path}: the brotli variant is smaller");
        assert_eq!(brotli_decode(&br_body), source, "{path}");

        let identity = get(&app, &path, &[]).await;
        assert_eq!(header(&identity, "content-type"), "text/javascript; charset=utf-8", "{path}");
        assert!(identity.headers().get("content-encoding").is_none(), "{path}");
        assert_eq!(header(&identity, "etag"), static_core::content_etag(&source), "{path}");
        assert_eq!(identity.bytes().await.unwrap(), source, "{path}");

        let revalidated = get(&app, &path, &[("accept-encoding", "br"), ("if-none-match", br_etag.as_str())]).await;
        assert_eq!(revalidated.status(), 304, "{path}");
        assert_eq!(header(&revalidated, "etag"), br_etag, "{path}");
        assert_eq!(header(&revalidated, "cache-control"), "no-cache", "{path}");
        assert!(revalidated.bytes().await.unwrap().is_empty(), "{path}");
    }
}

/// A private copy of the site in a temp dir with its own manifest, removed on drop.
struct SiteCopy {
    dir: PathBuf,
}

impl Drop for SiteCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Copies a file keeping its modification time, as a checkout or deploy would.
fn copy_with_mtime(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
    let modified = std::fs::metadata(from).unwrap().modified().unwrap();
    std::fs::File::options().write(true).open(to).unwrap().set_modified(modified).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            copy_with_mtime(&entry.path(), &target);
        }
    }
}

impl SiteCopy {
    /// `direct_mounts`: name the sources by absolute path, because Spin 4.0.2 mounts a
    /// relative source against the directory `spin up` runs in (see the host's files.rs).
    fn new(direct_mounts: bool) -> SiteCopy {
        let wasm = require_wasm("static_files.wasm");
        let precompressed = repo_root().join("target/static-precompressed");
        assert!(
            precompressed.join("index.html.meta.json").exists(),
            "run the precompress step first (scripts/test.sh does)"
        );
        let unique = format!(
            "ratatoskr-static-freshness-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        );
        let dir = std::env::temp_dir().join(unique);
        let copy = SiteCopy { dir };
        copy_dir(&repo_root().join("static"), &copy.dir.join("static"));
        copy_dir(&precompressed, &copy.dir.join("precompressed"));
        let manifest = format!(
            r#"spin_manifest_version = 2

[application]
name = "static-freshness"

[[trigger.http]]
route = "/..."
component = "static-files"

[component.static-files]
source = {wasm:?}
files = [
    {{ source = "{root}static", destination = "/site" }},
    {{ source = "{root}precompressed", destination = "/precompressed" }},
]
"#,
            wasm = wasm.to_str().unwrap(),
            root = if direct_mounts { format!("{}/", copy.dir.display()) } else { String::new() },
        );
        std::fs::write(copy.dir.join("spin.toml"), manifest).unwrap();
        copy
    }
}

/// `spin up` (and the host by default) serves the copy it made at start-up: the
/// variants stay valid although every copied file has a new mtime, and an edit
/// made while the app runs is not seen until a restart.
#[tokio::test(flavor = "multi_thread")]
async fn the_start_up_copy_is_served_compressed_and_edits_wait_for_a_restart() {
    let copy = SiteCopy::new(false);
    let app = TestApp::start(TestAppOptions::new(copy.dir.join("spin.toml"))).await.unwrap();
    let page = copy.dir.join("static/index.html");
    let original = std::fs::read(&page).unwrap();
    let br = get(&app, "/", &[("accept-encoding", "br, gzip")]).await;
    assert_eq!(br.status(), 200);
    assert_eq!(header(&br, "content-encoding"), "br", "the copied sidecar is still fresh");
    let br_etag = header(&br, "etag").to_owned();
    assert_eq!(
        br_etag,
        static_core::variant_etag(&static_core::content_etag(&original), static_core::Encoding::Brotli)
    );
    assert_eq!(brotli_decode(&br.bytes().await.unwrap()), original);

    let mut edited = original.clone();
    edited.extend_from_slice(b"<!-- edited while running zq82 -->\n");
    std::fs::write(&page, &edited).unwrap();
    let after = get(&app, "/", &[("accept-encoding", "br, gzip")]).await;
    assert_eq!(header(&after, "etag"), br_etag, "the running app serves its start-up copy");
    assert_eq!(brotli_decode(&after.bytes().await.unwrap()), original);
    drop(app);

    // After a restart the edit is seen: identity (its variant is stale), a new tag.
    let restarted = TestApp::start(TestAppOptions::new(copy.dir.join("spin.toml"))).await.unwrap();
    let fresh = get(&restarted, "/", &[("accept-encoding", "br, gzip")]).await;
    assert!(fresh.headers().get("content-encoding").is_none());
    assert_eq!(header(&fresh, "etag"), static_core::content_etag(&edited));
    assert_eq!(fresh.bytes().await.unwrap(), edited);
}

/// With `--direct-mounts` the site is mounted in place, so edits are served at once.
#[tokio::test(flavor = "multi_thread")]
async fn edits_to_the_site_are_served_at_once_without_a_rebuild() {
    let copy = SiteCopy::new(true);
    let app = TestApp::start(TestAppOptions::new(copy.dir.join("spin.toml")).direct_mounts()).await.unwrap();
    let page = copy.dir.join("static/index.html");
    let original = std::fs::read(&page).unwrap();

    // Before the edit the sidecar is fresh: the precompressed variant is served.
    let before_br = get(&app, "/", &[("accept-encoding", "br, gzip")]).await;
    assert_eq!(before_br.status(), 200);
    assert_eq!(header(&before_br, "content-encoding"), "br", "the copied sidecar is fresh");
    let before_br_etag = header(&before_br, "etag").to_owned();
    let before = get(&app, "/", &[]).await;
    let before_etag = header(&before, "etag").to_owned();
    assert_eq!(before.bytes().await.unwrap(), original);

    // Edit the page; the precompress step does NOT run.
    let mut edited = original.clone();
    edited.extend_from_slice(b"<!-- edited by the freshness test zq81 -->\n");
    std::fs::write(&page, &edited).unwrap();

    let after = get(&app, "/", &[("accept-encoding", "br, gzip")]).await;
    assert_eq!(after.status(), 200);
    assert!(after.headers().get("content-encoding").is_none(), "the stale variant must not be served");
    assert_eq!(header(&after, "vary"), "Accept-Encoding");
    let after_etag = header(&after, "etag").to_owned();
    assert_ne!(after_etag, before_etag);
    assert_ne!(after_etag, before_br_etag);
    assert!(after_etag.starts_with('"') && after_etag.ends_with('"'), "{after_etag}");
    for source in inline_script_sources(&edited) {
        assert_csp_allows_script(header(&after, "content-security-policy"), &source);
    }
    assert_eq!(header(&after, "content-length"), edited.len().to_string());
    assert_eq!(after.bytes().await.unwrap(), edited);

    // The old tag no longer validates; the new one does.
    let stale = get(&app, "/", &[("if-none-match", before_etag.as_str())]).await;
    assert_eq!(stale.status(), 200);
    assert_eq!(stale.bytes().await.unwrap(), edited);
    let fresh = get(&app, "/", &[("if-none-match", after_etag.as_str())]).await;
    assert_eq!(fresh.status(), 304);
    assert_eq!(header(&fresh, "etag"), after_etag);

    // An inline script is allowed by its hash at once, and changing it changes the CSP
    // hash with it, so the new code may run and the old hash is no longer allowed.
    let text = String::from_utf8(original.clone()).unwrap();
    assert!(text.contains("</body>"), "the test adds an inline <script> at the end of index.html's body");
    let with_script = |body: &str| text.replacen("</body>", &format!("<script>{body}</script>\n</body>"), 1);
    let scripted = with_script("// added by the freshness test\n");
    std::fs::write(&page, scripted.as_bytes()).unwrap();
    let old_sources = inline_script_sources(scripted.as_bytes());
    let added = get(&app, "/", &[("accept-encoding", "br")]).await;
    for source in &old_sources {
        assert_csp_allows_script(header(&added, "content-security-policy"), source);
    }
    assert_eq!(added.bytes().await.unwrap(), scripted.as_bytes());
    let rewritten = with_script("// edited by the freshness test\n");
    std::fs::write(&page, rewritten.as_bytes()).unwrap();
    let new_sources = inline_script_sources(rewritten.as_bytes());
    let new_source = new_sources.iter().find(|s| !old_sources.contains(s)).expect("the edit changed a script");
    let old_source = old_sources.iter().find(|s| !new_sources.contains(s)).expect("the edit changed a script");
    let rescripted = get(&app, "/", &[("accept-encoding", "br")]).await;
    let csp = header(&rescripted, "content-security-policy").to_owned();
    assert_csp_allows_script(&csp, new_source);
    assert!(!csp.contains(old_source.as_str()), "{csp}");
    assert_eq!(rescripted.bytes().await.unwrap(), rewritten.as_bytes());
}

/// Spin leaves Nagle on: a body written after its head has been sent waits for the
/// client's delayed ACK (~40 ms on Linux). The component queues a small body before
/// handing over the head, so the whole answer leaves at once; on one keep-alive
/// connection (as a browser reuses one) the body follows the head within a few ms.
#[tokio::test(flavor = "multi_thread")]
async fn a_small_body_leaves_with_its_head_on_a_keep_alive_connection() {
    let app = site().await;
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut gaps = Vec::new();
    for _ in 0..21 {
        let request = "GET / HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: br\r\n\r\n";
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut bytes = Vec::new();
        let mut first_byte_at = None;
        let mut buffer = vec![0u8; 64 * 1024];
        let total = loop {
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await.unwrap().unwrap();
            assert!(n > 0, "the connection closed");
            first_byte_at.get_or_insert_with(std::time::Instant::now);
            bytes.extend_from_slice(&buffer[..n]);
            if let Some(split) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&bytes[..split]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map(|v| v.trim().parse().unwrap())
                    .expect("content-length");
                if bytes.len() >= split + 4 + length {
                    break split + 4 + length;
                }
            }
        };
        assert_eq!(bytes.len(), total, "one response per request");
        gaps.push(first_byte_at.unwrap().elapsed());
    }
    gaps.sort();
    let median = gaps[gaps.len() / 2];
    assert!(median < Duration::from_millis(15), "the body trails its head by {median:?} (median of 21): {gaps:?}");
}
