//! The build step: what it writes, what it skips, and that re-runs only touch stale files.
#![cfg(feature = "precompress")]

mod common;

use std::fs;
use std::io::Read;

use common::{app_css, index_html, make_site, TempDir, INDEX_SCRIPT, INDEX_STYLE};
use static_core::precompress::{brotli_compress, gzip_compress, precompress_dir, Outcome};
use static_core::{content_etag, hash_source, Encoding, Sidecar};

fn sidecar(out: &std::path::Path, rel: &str) -> Sidecar {
    Sidecar::parse(&fs::read(out.join(format!("{rel}.meta.json"))).unwrap()).unwrap()
}

fn outcome_of<'r>(report: &'r static_core::precompress::Report, rel: &str) -> &'r Outcome {
    &report.files.iter().find(|f| f.rel == rel).unwrap_or_else(|| panic!("{rel} not reported")).outcome
}

#[test]
fn gzip_output_is_real_gzip() {
    let input = app_css();
    let gz = gzip_compress(input.as_bytes()).unwrap();
    // RFC 1952: magic 1f 8b, method 8 (deflate); not a raw or zlib deflate stream.
    assert_eq!(&gz[..3], &[0x1f, 0x8b, 0x08]);
    let trailer_size = u32::from_le_bytes(gz[gz.len() - 4..].try_into().unwrap());
    assert_eq!(trailer_size as usize, input.len());
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut out).unwrap();
    assert_eq!(out, input.as_bytes());
    // A zlib/raw-deflate decoder must not be what accepts it.
    assert!(flate2::read::ZlibDecoder::new(&gz[..]).read_to_end(&mut Vec::new()).is_err());
}

#[test]
fn brotli_output_round_trips() {
    let input = index_html();
    let br = brotli_compress(input.as_bytes()).unwrap();
    assert!(br.len() < input.len());
    let mut out = Vec::new();
    brotli::Decompressor::new(&br[..], 4096).read_to_end(&mut out).unwrap();
    assert_eq!(out, input.as_bytes());
}

#[test]
fn writes_variants_for_compressible_files_only() {
    let dir = TempDir::new("pre");
    let site = make_site(&dir);
    let out = dir.join("out");
    let report = precompress_dir(&site, &out).unwrap();

    for rel in ["index.html", "x/y.css", "app.js"] {
        let Outcome::Written { variants, .. } = outcome_of(&report, rel) else { panic!("{rel}") };
        assert_eq!(variants.len(), 2, "{rel}");
        let source = fs::read(site.join(rel)).unwrap();
        let br = fs::read(out.join(format!("{rel}.br"))).unwrap();
        let gz = fs::read(out.join(format!("{rel}.gz"))).unwrap();
        let mut decoded = Vec::new();
        brotli::Decompressor::new(&br[..], 4096).read_to_end(&mut decoded).unwrap();
        assert_eq!(decoded, source, "{rel}.br");
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut decoded).unwrap();
        assert_eq!(decoded, source, "{rel}.gz");
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    }

    // Already-compressed formats: a sidecar (etag) but never a variant.
    assert!(!out.join("logo.png.br").exists());
    assert!(!out.join("logo.png.gz").exists());
    assert!(sidecar(&out, "logo.png").variants.is_empty());
    // Too small to gain anything.
    assert!(!out.join("robots.txt.br").exists());
    assert!(sidecar(&out, "robots.txt").variants.is_empty());
    // Names the component refuses are not processed.
    assert_eq!(outcome_of(&report, ".env"), &Outcome::SkippedUnservable);
    assert!(!out.join(".env.meta.json").exists());
}

#[test]
fn sidecar_records_size_etag_sizes_and_csp() {
    let dir = TempDir::new("pre");
    let site = make_site(&dir);
    let out = dir.join("out");
    precompress_dir(&site, &out).unwrap();

    let meta = sidecar(&out, "index.html");
    let source = fs::read(site.join("index.html")).unwrap();
    assert_eq!(meta.size, source.len() as u64);
    assert_eq!(meta.etag, content_etag(&source));
    for encoding in [Encoding::Brotli, Encoding::Gzip] {
        let suffix = encoding.file_suffix().unwrap();
        let size = fs::metadata(out.join(format!("index.html{suffix}"))).unwrap().len();
        assert_eq!(meta.variant_size(encoding), Some(size));
    }
    let csp = meta.csp.expect("html sidecar has csp hashes");
    assert_eq!(csp.scripts, vec![hash_source(INDEX_SCRIPT.as_bytes())]);
    assert_eq!(csp.styles, vec![hash_source(INDEX_STYLE.as_bytes())]);
    assert!(sidecar(&out, "x/y.css").csp.is_none());

    let raw = fs::read_to_string(out.join("index.html.meta.json")).unwrap();
    for field in ["\"size\"", "\"etag\"", "\"variants\"", "\"csp\""] {
        assert!(raw.contains(field), "{field} in {raw}");
    }
    // Nothing that a copy of the files would change (spin up copies them).
    assert!(!raw.contains("mtime"), "{raw}");
}

#[test]
fn reruns_only_rewrite_stale_outputs() {
    let dir = TempDir::new("pre");
    let site = make_site(&dir);
    let out = dir.join("out");
    precompress_dir(&site, &out).unwrap();
    let css_br_mtime = fs::metadata(out.join("x/y.css.br")).unwrap().modified().unwrap();

    let again = precompress_dir(&site, &out).unwrap();
    for file in &again.files {
        assert!(matches!(file.outcome, Outcome::UpToDate | Outcome::SkippedUnservable), "{file:?}");
    }
    assert_eq!(fs::metadata(out.join("x/y.css.br")).unwrap().modified().unwrap(), css_br_mtime);

    // A new mtime alone (a copy, a checkout) is not an edit: nothing is redone.
    dir.set_mtime("site/x/y.css", 2_000_000_000, 5);
    let touched = precompress_dir(&site, &out).unwrap();
    assert_eq!(outcome_of(&touched, "x/y.css"), &Outcome::UpToDate);

    // Edit one file, keeping its size and mtime: the content tells, only it is redone.
    let before = fs::metadata(site.join("index.html")).unwrap();
    dir.write("site/index.html", index_html().replace("hello", "HELLO"));
    fs::File::options()
        .write(true)
        .open(site.join("index.html"))
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    assert_eq!(fs::metadata(site.join("index.html")).unwrap().len(), before.len());
    let third = precompress_dir(&site, &out).unwrap();
    assert!(matches!(outcome_of(&third, "index.html"), Outcome::Written { .. }));
    assert_eq!(outcome_of(&third, "x/y.css"), &Outcome::UpToDate);
    let meta = sidecar(&out, "index.html");
    assert_eq!(meta.etag, content_etag(&fs::read(site.join("index.html")).unwrap()));

    // A deleted variant is noticed and rebuilt.
    fs::remove_file(out.join("app.js.gz")).unwrap();
    let fourth = precompress_dir(&site, &out).unwrap();
    assert!(matches!(outcome_of(&fourth, "app.js"), Outcome::Written { .. }));
    assert!(out.join("app.js.gz").is_file());
}

#[test]
fn outputs_of_deleted_sources_are_removed() {
    let dir = TempDir::new("pre");
    let site = make_site(&dir);
    let out = dir.join("out");
    precompress_dir(&site, &out).unwrap();
    fs::remove_file(site.join("x/y.css")).unwrap();
    let report = precompress_dir(&site, &out).unwrap();
    assert_eq!(report.removed, vec!["x/y.css.br", "x/y.css.gz", "x/y.css.meta.json"]);
    assert!(!out.join("x/y.css.meta.json").exists());
    assert!(out.join("index.html.meta.json").exists());
}

#[test]
fn a_file_that_stops_compressing_loses_its_variants() {
    let dir = TempDir::new("pre");
    let site = make_site(&dir);
    let out = dir.join("out");
    precompress_dir(&site, &out).unwrap();
    assert!(out.join("app.js.br").exists());
    dir.write("site/app.js", "x");
    dir.set_mtime("site/app.js", 1_900_000_000, 0);
    precompress_dir(&site, &out).unwrap();
    assert!(!out.join("app.js.br").exists());
    assert!(!out.join("app.js.gz").exists());
    assert!(sidecar(&out, "app.js").variants.is_empty());
}
