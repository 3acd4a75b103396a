//! Build step: brotli/gzip variants and `.meta.json` sidecars for a site directory.
//!
//! Never run per request. Rewrites only what is stale, writes the sidecar last (so a
//! crash leaves it stale and the component falls back to identity), and removes
//! outputs whose source is gone.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::csp::inline_hashes;
use crate::encoding::Encoding;
use crate::etag::content_etag;
use crate::media::media_type_for;
use crate::path::sanitize_request_path;
use crate::sidecar::{sidecar_rel_path, variant_rel_path, Sidecar, VariantRecord, SIDECAR_FORMAT};

/// What happened to one source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    UpToDate,
    /// Sidecar (re)written; the variants kept, with their sizes.
    Written {
        source_size: u64,
        variants: Vec<(Encoding, u64)>,
    },
    /// The component would never serve this name (hidden, non-ASCII, ...).
    SkippedUnservable,
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileReport {
    pub rel: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub files: Vec<FileReport>,
    /// Output files removed because their source is gone (relative to the output dir).
    pub removed: Vec<String>,
}

/// Brotli at quality 11 (the maximum), default window.
pub fn brotli_compress(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let params = brotli::enc::BrotliEncoderParams { quality: 11, lgwin: 22, ..Default::default() };
    brotli::BrotliCompress(&mut io::Cursor::new(bytes), &mut out, &params)?;
    Ok(out)
}

/// gzip (RFC 1952 framing: magic, header, CRC32, size trailer) at level 9.
pub fn gzip_compress(bytes: &[u8]) -> io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes)?;
    encoder.finish()
}

/// Brings `out_dir` up to date with `site_dir`.
pub fn precompress_dir(site_dir: &Path, out_dir: &Path) -> io::Result<Report> {
    let mut sources = Vec::new();
    collect_files(site_dir, site_dir, &mut sources)?;
    sources.sort();
    fs::create_dir_all(out_dir)?;

    let mut report = Report::default();
    for rel in &sources {
        let outcome = precompress_file(site_dir, out_dir, rel)?;
        report.files.push(FileReport { rel: rel.clone(), outcome });
    }
    remove_orphans(site_dir, out_dir, out_dir, &mut report.removed)?;
    report.removed.sort();
    Ok(report)
}

/// For a component's build script: brings `out_dir` up to date with
/// `site_dir` (as [`precompress_dir`]), then returns the Rust expression of
/// the whole site as an [`crate::Embedded`], every file with its sidecar and
/// variants by `include_bytes!` of absolute paths, sorted by path.
pub fn embed_source(site_dir: &Path, out_dir: &Path) -> io::Result<String> {
    let report = precompress_dir(site_dir, out_dir)?;
    let (site_dir, out_dir) = (fs::canonicalize(site_dir)?, fs::canonicalize(out_dir)?);
    let include = |path: PathBuf| -> io::Result<String> {
        let path = path.to_str().ok_or(io::ErrorKind::InvalidFilename)?;
        Ok(format!("include_bytes!({path:?})"))
    };
    let optional = |path: Option<PathBuf>| -> io::Result<String> {
        match path.filter(|p| p.is_file()) {
            Some(path) => Ok(format!("Some({})", include(path)?)),
            None => Ok("None".to_owned()),
        }
    };
    let variant = |rel: &str, encoding| optional(variant_rel_path(rel, encoding).map(|v| out_dir.join(v)));
    let mut files = Vec::new();
    for file in report.files.iter().filter(|f| f.outcome != Outcome::SkippedUnservable) {
        let rel = file.rel.as_str();
        files.push(format!(
            "static_core::EmbeddedFile {{ rel: {rel:?}, bytes: {}, sidecar: {}, brotli: {}, gzip: {} }},\n",
            include(site_dir.join(rel))?,
            optional(Some(out_dir.join(sidecar_rel_path(rel))))?,
            variant(rel, Encoding::Brotli)?,
            variant(rel, Encoding::Gzip)?,
        ));
    }
    Ok(format!("static_core::Embedded(&[\n{}])", files.concat()))
}

fn precompress_file(site_dir: &Path, out_dir: &Path, rel: &str) -> io::Result<Outcome> {
    if sanitize_request_path(&format!("/{rel}")).is_err() {
        return Ok(Outcome::SkippedUnservable);
    }
    // Everything below derives from this one read: an edit made meanwhile only
    // makes the sidecar stale, which the component notices by content.
    let bytes = fs::read(site_dir.join(rel))?;
    let size = bytes.len() as u64;
    let etag = content_etag(&bytes);
    let media = media_type_for(rel);

    if let Some(existing) = read_existing_sidecar(out_dir, rel) {
        if existing.is_fresh_for(size, &etag) && outputs_match(out_dir, rel, &existing) {
            return Ok(Outcome::UpToDate);
        }
    }

    let mut variants = Vec::new();
    for encoding in [Encoding::Brotli, Encoding::Gzip] {
        let Some(variant_rel) = variant_rel_path(rel, encoding) else {
            continue;
        };
        let variant_path = out_dir.join(&variant_rel);
        let compressed = if media.compressible {
            match encoding {
                Encoding::Brotli => Some(brotli_compress(&bytes)?),
                _ => Some(gzip_compress(&bytes)?),
            }
        } else {
            None
        };
        match compressed {
            // A variant that doesn't save bytes only costs a file and a decode.
            Some(compressed) if compressed.len() < bytes.len() => {
                write_atomically(&variant_path, &compressed)?;
                variants.push((encoding, compressed.len() as u64));
            }
            _ => remove_if_present(&variant_path)?,
        }
    }

    let sidecar = Sidecar {
        format: SIDECAR_FORMAT,
        size,
        etag,
        variants: variants
            .iter()
            .map(|(encoding, size)| VariantRecord { encoding: encoding.sidecar_name().to_owned(), size: *size })
            .collect(),
        csp: media.is_html.then(|| inline_hashes(&bytes)),
    };
    write_atomically(&out_dir.join(sidecar_rel_path(rel)), sidecar.to_json().as_bytes())?;
    Ok(Outcome::Written { source_size: size, variants })
}

fn read_existing_sidecar(out_dir: &Path, rel: &str) -> Option<Sidecar> {
    Sidecar::parse(&fs::read(out_dir.join(sidecar_rel_path(rel))).ok()?)
}

/// The recorded variants exist with their recorded sizes.
fn outputs_match(out_dir: &Path, rel: &str, sidecar: &Sidecar) -> bool {
    sidecar.variants.iter().all(|variant| {
        Encoding::from_sidecar_name(&variant.encoding)
            .and_then(|encoding| variant_rel_path(rel, encoding))
            .and_then(|variant_rel| fs::metadata(out_dir.join(variant_rel)).ok())
            .is_some_and(|m| m.is_file() && m.len() == variant.size)
    })
}

/// Regular files under `dir`, as `/`-separated paths relative to `root`.
/// Symlinks are skipped: the component's mount would not follow them out anyway.
fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let file_type = entry.file_type()?;
        let path = entry.path();
        if file_type.is_dir() {
            collect_files(root, &path, out)?;
        } else if file_type.is_file() {
            if let Some(rel) = relative_slash_path(root, &path) {
                out.push(rel);
            }
        }
    }
    Ok(())
}

fn relative_slash_path(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

/// Removes `.br`/`.gz`/`.meta.json` outputs whose source file no longer exists.
fn remove_orphans(site_dir: &Path, out_root: &Path, dir: &Path, removed: &mut Vec<String>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            remove_orphans(site_dir, out_root, &path, removed)?;
            continue;
        }
        let Some(rel) = relative_slash_path(out_root, &path) else {
            continue;
        };
        let source_rel = [".meta.json", ".br", ".gz"].iter().find_map(|suffix| rel.strip_suffix(suffix));
        let Some(source_rel) = source_rel else {
            continue;
        };
        if !site_dir.join(source_rel).is_file() {
            fs::remove_file(&path)?;
            removed.push(rel);
        }
    }
    Ok(())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".tmp");
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
