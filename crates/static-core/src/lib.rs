//! Everything the static-file component decides, as plain testable Rust, plus the
//! `precompress` build step (feature `precompress`, on by default, off in the component).
//!
//! - [`path`]: raw request path -> safe relative file path (or a refusal = 404)
//! - [`media`]: content type and compressibility by extension
//! - [`encoding`]: `Accept-Encoding` negotiation
//! - [`etag`]: strong ETags and `If-None-Match`
//! - [`csp`]: inline script/style hashes and the page CSP
//! - [`sidecar`]: the precompress metadata and its freshness rule (by content)
//! - [`serve`]: one request -> one reply, from a [`Site`] on disk or an [`Embedded`] one
//! - `guest` (wasm32 only): that reply sent over wasi:http

pub mod csp;
pub mod encoding;
pub mod etag;
#[cfg(target_arch = "wasm32")]
pub mod guest;
pub mod media;
pub mod path;
#[cfg(feature = "precompress")]
pub mod precompress;
pub mod serve;
pub mod sidecar;

pub use csp::{content_security_policy, hash_source, inline_hashes, InlineHashes};
pub use encoding::{negotiate, Encoding};
pub use etag::{content_etag, content_etag_of, if_none_match_matches, variant_etag};
pub use media::{media_type_for, MediaType};
pub use path::{sanitize_request_path, traversal_corpus, PathRefusal, SafePath, MAX_PATH_BYTES};
pub use serve::{
    join_field_values, request_path, serve, Embedded, EmbeddedFile, Files, Reply, ReplyBody, RequestHead, Site, Source,
    WHOLE_FILE_LIMIT,
};
pub use sidecar::Sidecar;
