//! One request in, one reply out: every decision of the static-file component.
//!
//! The component only translates the Spin request into a [`RequestHead`] and the
//! [`Reply`] back into a response, so everything here is tested natively.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::csp::{content_security_policy, inline_hashes, InlineHashes, ERROR_CSP};
use crate::encoding::{negotiate, Encoding};
use crate::etag::{content_etag, content_etag_of, if_none_match_matches, variant_etag};
use crate::media::{media_type_for, MediaType};
use crate::path::sanitize_request_path;
use crate::sidecar::{sidecar_rel_path, variant_rel_path, Sidecar};

/// Sidecars are a few hundred bytes; anything bigger is not ours.
const MAX_SIDECAR_BYTES: u64 = 64 * 1024;

/// Revalidate everything: asset names carry no content hash, so any max-age could pair
/// a new page with stale CSS/JS after a deploy, and a revalidation here is a 304 that
/// costs one read of the file through XXH3 and one small sidecar read.
pub const CACHE_CONTROL: &str = "no-cache";
const ERROR_CACHE_CONTROL: &str = "no-store";

pub const ALLOW: &str = "GET, HEAD";

/// Where a site's files come from: the directories spin.toml mounts
/// ([`Site`]) or bytes built into the component ([`Embedded`]).
pub trait Files {
    /// The file at the safe relative path `rel`, with its content tag.
    fn source(&self, rel: &str) -> io::Result<Source>;
    /// Its `precompress` sidecar, if there is a valid one (fresh or not).
    fn sidecar(&self, rel: &str) -> Option<Sidecar>;
    /// Its variant in `encoding`, if it is there with the size the sidecar recorded.
    fn variant(&self, rel: &str, encoding: Encoding, recorded: u64) -> Option<ReplyBody>;
}

/// Where the component finds its files.
#[derive(Clone, Debug)]
pub struct Site {
    /// The site itself (spin.toml mounts `static/` at `/site`).
    pub root: PathBuf,
    /// Output of `precompress` (mounted at `/precompressed`); may be missing or stale.
    pub precompressed: PathBuf,
}

impl Site {
    pub fn new(root: impl Into<PathBuf>, precompressed: impl Into<PathBuf>) -> Site {
        Site { root: root.into(), precompressed: precompressed.into() }
    }

    /// The mounts spin.toml gives the component.
    pub fn spin_mounts() -> Site {
        Site::new("/site", "/precompressed")
    }
}

impl Files for Site {
    fn source(&self, rel: &str) -> io::Result<Source> {
        let file = File::open(self.root.join(rel))?;
        let metadata = file.metadata()?;
        if !metadata.is_file() {
            return Err(io::ErrorKind::IsADirectory.into());
        }
        Source::read(file, metadata.len())
    }

    fn sidecar(&self, rel: &str) -> Option<Sidecar> {
        read_sidecar(&self.precompressed, rel)
    }

    fn variant(&self, rel: &str, encoding: Encoding, recorded: u64) -> Option<ReplyBody> {
        open_variant(&self.precompressed, rel, encoding, recorded)
    }
}

/// One file of a site built into a component: its bytes, and what
/// `precompress` made of them (see `precompress::embed_source`).
#[derive(Debug)]
pub struct EmbeddedFile {
    /// The path below the site's root, as [`sanitize_request_path`] gives it.
    pub rel: &'static str,
    pub bytes: &'static [u8],
    pub sidecar: Option<&'static [u8]>,
    pub brotli: Option<&'static [u8]>,
    pub gzip: Option<&'static [u8]>,
}

/// A site built into the component, sorted by `rel`: no file system, and
/// what it serves is exactly what the build saw.
#[derive(Clone, Copy, Debug)]
pub struct Embedded(pub &'static [EmbeddedFile]);

impl Embedded {
    fn find(&self, rel: &str) -> Option<&'static EmbeddedFile> {
        let files = self.0;
        files.binary_search_by(|f| f.rel.cmp(rel)).ok().map(|i| &files[i])
    }
}

impl Files for Embedded {
    fn source(&self, rel: &str) -> io::Result<Source> {
        let file = self.find(rel).ok_or(io::ErrorKind::NotFound)?;
        Ok(Source::embedded(file.bytes))
    }

    fn sidecar(&self, rel: &str) -> Option<Sidecar> {
        Sidecar::parse(self.find(rel)?.sidecar?)
    }

    fn variant(&self, rel: &str, encoding: Encoding, recorded: u64) -> Option<ReplyBody> {
        let file = self.find(rel)?;
        let bytes = match encoding {
            Encoding::Brotli => file.brotli?,
            Encoding::Gzip => file.gzip?,
            Encoding::Identity => return None,
        };
        (bytes.len() as u64 == recorded).then_some(ReplyBody::Static(bytes))
    }
}

/// The parts of a request that matter here.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestHead<'a> {
    pub method: &'a str,
    /// Raw (percent-encoded) path without query, e.g. from `spin-path-info`.
    pub path: &'a str,
    pub accept_encoding: Option<&'a str>,
    pub if_none_match: Option<&'a str>,
}

/// The response to send. Header names are lowercase.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: ReplyBody,
}

#[derive(Debug)]
pub enum ReplyBody {
    /// No body (HEAD, 304). Content-Length, if present, describes the GET body.
    Empty,
    Bytes(Vec<u8>),
    /// Bytes built into the component.
    Static(&'static [u8]),
    /// Stream exactly `len` bytes from this already-open file.
    File {
        file: File,
        len: u64,
    },
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The whole body in memory (tests, and callers that don't stream).
    pub fn into_body_bytes(self) -> io::Result<Vec<u8>> {
        match self.body {
            ReplyBody::Empty => Ok(Vec::new()),
            ReplyBody::Bytes(bytes) => Ok(bytes),
            ReplyBody::Static(bytes) => Ok(bytes.to_vec()),
            ReplyBody::File { file, len } => {
                let mut bytes = Vec::new();
                file.take(len).read_to_end(&mut bytes)?;
                Ok(bytes)
            }
        }
    }

    pub fn not_found(head_only: bool) -> Reply {
        error_reply(404, r#"{"error_code":"not_found"}"#, head_only)
    }

    pub fn method_not_allowed() -> Reply {
        let mut reply = error_reply(405, r#"{"error_code":"method_not_allowed"}"#, false);
        reply.headers.push(("allow", ALLOW.to_owned()));
        reply
    }

    pub fn internal_error(head_only: bool) -> Reply {
        error_reply(500, r#"{"error_code":"internal_error"}"#, head_only)
    }
}

fn error_reply(status: u16, body: &'static str, head_only: bool) -> Reply {
    let mut headers = security_headers();
    headers.extend([
        ("content-type", "application/json".to_owned()),
        ("content-length", body.len().to_string()),
        ("cache-control", ERROR_CACHE_CONTROL.to_owned()),
        ("content-security-policy", ERROR_CSP.to_owned()),
    ]);
    let body = if head_only { ReplyBody::Empty } else { ReplyBody::Bytes(body.as_bytes().to_vec()) };
    Reply { status, headers, body }
}

fn security_headers() -> Vec<(&'static str, String)> {
    vec![("x-content-type-options", "nosniff".to_owned()), ("referrer-policy", "no-referrer".to_owned())]
}

/// The request path Spin gives us: `spin-path-info` (relative to the `/...` route;
/// empty means the route's root), else the path of the request URI.
pub fn request_path<'a>(spin_path_info: Option<&'a str>, path_with_query: Option<&'a str>) -> &'a str {
    match spin_path_info {
        Some("") => "/",
        Some(path) => path,
        None => {
            let uri_path = path_with_query.unwrap_or("");
            uri_path.split_once('?').map_or(uri_path, |(path, _)| path)
        }
    }
}

/// All values of a repeated header as one comma-separated field (RFC 9110 §5.3).
/// Bytes that aren't UTF-8 become U+FFFD, which matches no token or tag.
pub fn join_field_values(values: &[Vec<u8>]) -> Option<String> {
    if values.is_empty() {
        return None;
    }
    let parts: Vec<_> = values.iter().map(|v| String::from_utf8_lossy(v)).collect();
    Some(parts.join(", "))
}

/// Answers one request. Never panics; I/O trouble other than "no such file" is a 500.
pub fn serve(site: &impl Files, request: &RequestHead<'_>) -> Reply {
    let head_only = match request.method {
        "GET" => false,
        "HEAD" => true,
        _ => return Reply::method_not_allowed(),
    };
    let Ok(rel) = sanitize_request_path(request.path) else {
        return Reply::not_found(head_only);
    };
    match serve_file(site, rel.as_str(), request, head_only) {
        Ok(reply) => reply,
        Err(error) if means_not_found(&error) => Reply::not_found(head_only),
        Err(_) => Reply::internal_error(head_only),
    }
}

fn means_not_found(error: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(error.kind(), NotFound | NotADirectory | IsADirectory | PermissionDenied | InvalidFilename | InvalidInput)
}

fn serve_file(site: &impl Files, rel: &str, request: &RequestHead<'_>, head_only: bool) -> io::Result<Reply> {
    let media = media_type_for(rel);
    let mut source = site.source(rel)?;
    let size = source.size;
    let base_etag = source.etag.clone();

    // Trust the build step's work only while the source is exactly what it saw.
    let sidecar =
        site.sidecar(rel).filter(|s| s.is_fresh_for(size, &base_etag)).filter(|s| !media.is_html || s.csp.is_some());

    let (available, mut csp) = match &sidecar {
        Some(s) if media.compressible => (s.encodings(), s.csp.clone()),
        Some(s) => (Vec::new(), s.csp.clone()),
        None => (Vec::new(), None),
    };
    // An edited page (no fresh sidecar) gets its hashes now, so its inline code runs.
    if media.is_html && csp.is_none() {
        csp = Some(inline_hashes(source.bytes()?));
    }
    let mut encoding = negotiate(request.accept_encoding, &available);

    if let Some(if_none_match) = request.if_none_match {
        let etag = variant_etag(&base_etag, encoding);
        if if_none_match_matches(if_none_match, &etag) {
            let headers = validator_headers(media, &etag, csp.as_ref());
            return Ok(Reply { status: 304, headers, body: ReplyBody::Empty });
        }
    }

    // A variant missing or damaged since the build: negotiate again without it.
    let mut available = available;
    let mut body = None;
    while encoding != Encoding::Identity {
        let recorded = sidecar.as_ref().and_then(|s| s.variant_size(encoding));
        if let Some(variant) = recorded.and_then(|recorded| site.variant(rel, encoding, recorded)) {
            body = Some(variant);
            break;
        }
        available.retain(|e| *e != encoding);
        encoding = negotiate(request.accept_encoding, &available);
    }
    let body = match body {
        Some(body) => body,
        None => source.into_body()?,
    };
    let content_length = match &body {
        ReplyBody::Empty => 0,
        ReplyBody::Bytes(bytes) => bytes.len() as u64,
        ReplyBody::Static(bytes) => bytes.len() as u64,
        ReplyBody::File { len, .. } => *len,
    };

    let etag = variant_etag(&base_etag, encoding);
    let mut headers = validator_headers(media, &etag, csp.as_ref());
    headers.push(("content-type", media.content_type.to_owned()));
    headers.push(("content-length", content_length.to_string()));
    if let Some(coding) = encoding.content_encoding() {
        headers.push(("content-encoding", coding.to_owned()));
    }
    let body = if head_only { ReplyBody::Empty } else { body };
    Ok(Reply { status: 200, headers, body })
}

/// Files up to this size are read whole, in one go; larger ones are hashed and
/// sent in chunks, never held in memory.
pub const WHOLE_FILE_LIMIT: u64 = 256 * 1024;

/// The requested file and its content tag.
///
/// The content is its own identity: hashed on every request, so neither the
/// tag nor the sidecar's authority depends on modification times surviving a
/// copy.
pub struct Source {
    size: u64,
    etag: String,
    content: Content,
}

enum Content {
    File {
        file: File,
        /// The whole content, for a file of at most [`WHOLE_FILE_LIMIT`] bytes.
        bytes: Option<Vec<u8>>,
    },
    Static(&'static [u8]),
}

impl Source {
    /// A file of `size` bytes. A small file is read once, whole: its bytes give
    /// the tag and, if identity is served, the body (each file system call is
    /// a hop to a blocking thread in Spin).
    pub fn read(file: File, size: u64) -> io::Result<Source> {
        if size <= WHOLE_FILE_LIMIT {
            let bytes = read_exactly(&file, size)?;
            let etag = content_etag(&bytes);
            return Ok(Source { size, etag, content: Content::File { file, bytes: Some(bytes) } });
        }
        let etag = content_etag_of(&file, size)?;
        Ok(Source { size, etag, content: Content::File { file, bytes: None } })
    }

    pub fn embedded(bytes: &'static [u8]) -> Source {
        Source { size: bytes.len() as u64, etag: content_etag(bytes), content: Content::Static(bytes) }
    }

    /// The whole content (read now for a large file: only an edited HTML page needs it).
    fn bytes(&mut self) -> io::Result<&[u8]> {
        match &mut self.content {
            Content::Static(bytes) => Ok(bytes),
            Content::File { file, bytes } => {
                if bytes.is_none() {
                    (&*file).seek(SeekFrom::Start(0))?;
                    *bytes = Some(read_exactly(file, self.size)?);
                }
                Ok(bytes.as_deref().unwrap_or_default())
            }
        }
    }

    fn into_body(self) -> io::Result<ReplyBody> {
        match self.content {
            Content::Static(bytes) => Ok(ReplyBody::Static(bytes)),
            Content::File { bytes: Some(bytes), .. } => Ok(ReplyBody::Bytes(bytes)),
            Content::File { file, bytes: None } => {
                (&file).seek(SeekFrom::Start(0))?;
                Ok(ReplyBody::File { file, len: self.size })
            }
        }
    }
}

/// Exactly `size` bytes from the start of `file`; a shorter file is an error (it
/// changed under us, and a tag for bytes we will not send must not be made).
fn read_exactly(mut file: &File, size: u64) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; usize::try_from(size).map_err(|_| io::ErrorKind::OutOfMemory)?];
    file.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Headers shared by a 200 and its 304 (RFC 9110 §15.4.5).
fn validator_headers(media: MediaType, etag: &str, csp: Option<&InlineHashes>) -> Vec<(&'static str, String)> {
    let mut headers = security_headers();
    headers.push(("etag", etag.to_owned()));
    headers.push(("cache-control", CACHE_CONTROL.to_owned()));
    if media.compressible {
        headers.push(("vary", "Accept-Encoding".to_owned()));
    }
    if media.is_html {
        headers.push(("x-frame-options", "DENY".to_owned()));
        if let Some(csp) = csp {
            headers.push(("content-security-policy", content_security_policy(csp)));
        }
    }
    headers
}

fn read_sidecar(precompressed: &Path, rel: &str) -> Option<Sidecar> {
    let mut file = File::open(precompressed.join(sidecar_rel_path(rel))).ok()?;
    // One read usually holds it all, and a JSON object is complete only with its
    // closing brace, so parse after each read: no extra read just to see the end.
    // Sidecars are a few hundred bytes: start small (a zeroed 64 KiB buffer per
    // request cost more than the read) and grow only up to the bound.
    let mut bytes = vec![0u8; 1024];
    let mut len = 0;
    loop {
        let n = file.read(&mut bytes[len..]).ok()?;
        if n == 0 {
            return None;
        }
        len += n;
        if let Some(sidecar) = Sidecar::parse(&bytes[..len]) {
            return Some(sidecar);
        }
        if len == bytes.len() {
            if len >= MAX_SIDECAR_BYTES as usize {
                return None; // bigger than any sidecar of ours
            }
            bytes.resize((len * 4).min(MAX_SIDECAR_BYTES as usize), 0);
        }
    }
}

/// The variant, if it is there with the size the sidecar recorded: in memory when
/// small, else the open file to stream.
fn open_variant(precompressed: &Path, rel: &str, encoding: Encoding, recorded: u64) -> Option<ReplyBody> {
    let file = File::open(precompressed.join(variant_rel_path(rel, encoding)?)).ok()?;
    if recorded <= WHOLE_FILE_LIMIT {
        // Asking for one byte more than recorded checks the size in the same read.
        let mut bytes = Vec::with_capacity(recorded as usize + 1);
        (&file).take(recorded + 1).read_to_end(&mut bytes).ok()?;
        return (bytes.len() as u64 == recorded).then_some(ReplyBody::Bytes(bytes));
    }
    let metadata = file.metadata().ok()?;
    (metadata.is_file() && metadata.len() == recorded).then_some(ReplyBody::File { file, len: recorded })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_of_any_size_up_to_the_bound_are_read_and_larger_ones_refused() {
        let dir = std::env::temp_dir().join(format!("sidecar-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sidecar = Sidecar {
            format: crate::sidecar::SIDECAR_FORMAT,
            size: 10,
            etag: "\"AAAAAAAAAAAAAAAAAAAAAA\"".to_owned(),
            variants: vec![],
            csp: None,
        };
        // Padding (JSON whitespace) across the growth steps: 1 KiB, 4 KiB, 16 KiB, 64 KiB.
        for pad in [0, 1_000, 5_000, 30_000, 60_000, 70_000] {
            let json = format!("{}{}", " ".repeat(pad), sidecar.to_json());
            std::fs::write(dir.join("a.txt.meta.json"), &json).unwrap();
            let read = read_sidecar(&dir, "a.txt");
            if json.len() <= MAX_SIDECAR_BYTES as usize {
                assert_eq!(read.as_ref(), Some(&sidecar), "{} bytes", json.len());
            } else {
                assert_eq!(read, None, "{} bytes", json.len());
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn request_path_prefers_spin_path_info() {
        assert_eq!(request_path(Some("/app.css"), Some("/app.css?x=1")), "/app.css");
        assert_eq!(request_path(Some(""), Some("/")), "/");
        assert_eq!(request_path(None, Some("/a/b.js?v=2")), "/a/b.js");
        assert_eq!(request_path(None, Some("/a")), "/a");
        assert_eq!(request_path(None, None), "");
    }

    #[test]
    fn repeated_fields_are_joined() {
        assert_eq!(join_field_values(&[]), None);
        assert_eq!(join_field_values(&[b"\"a\"".to_vec()]).as_deref(), Some("\"a\""));
        assert_eq!(join_field_values(&[b"\"a\"".to_vec(), b"W/\"b\"".to_vec()]).as_deref(), Some("\"a\", W/\"b\""));
        assert_eq!(join_field_values(&[vec![0xff]]).as_deref(), Some("\u{fffd}"));
    }

    #[test]
    fn error_replies_are_fixed_and_hardened() {
        for reply in [Reply::not_found(false), Reply::method_not_allowed(), Reply::internal_error(false)] {
            assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
            assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
            assert_eq!(reply.header("content-type"), Some("application/json"));
            let len: usize = reply.header("content-length").unwrap().parse().unwrap();
            assert_eq!(reply.into_body_bytes().unwrap().len(), len);
        }
        assert_eq!(Reply::method_not_allowed().header("allow"), Some("GET, HEAD"));
        assert_eq!(Reply::method_not_allowed().status, 405);
        assert!(Reply::not_found(true).into_body_bytes().unwrap().is_empty());
    }
}
