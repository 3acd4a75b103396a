//! The wasm side: one request in, its reply out, for every component that
//! serves a site (the Spin static-files component from its mounts, the
//! portable console from the site built into it).

use std::io::Read;

use guest_http::respond;
use spin_sdk::http::{IncomingRequest, ResponseOutparam};

use crate::{join_field_values, request_path, serve, Files, ReplyBody, RequestHead};

/// Answers `request` from `files`. `path_info` is Spin's `spin-path-info`
/// where the runtime routes; without it, the request's own path counts.
pub fn handle(request: IncomingRequest, response_out: ResponseOutparam, files: &impl Files, path_info: Option<&str>) {
    // Never read the request body: a static GET has none, and a large POST must
    // not be buffered just to be told 405.
    let headers = request.headers();
    let field = |name: &str| join_field_values(&headers.get(name));
    let path_with_query = request.path_with_query();
    let accept_encoding = field("accept-encoding");
    let if_none_match = field("if-none-match");
    let method = request.method().to_string();

    let head = RequestHead {
        method: &method,
        path: request_path(path_info, path_with_query.as_deref()),
        accept_encoding: accept_encoding.as_deref(),
        if_none_match: if_none_match.as_deref(),
    };
    let reply = serve(files, &head);
    let first: &[u8] = match &reply.body {
        ReplyBody::Bytes(bytes) => bytes,
        ReplyBody::Static(bytes) => bytes,
        _ => &[],
    };
    // No head (unreachable with static-core's fixed headers): the host answers 500.
    let Some(body) = respond(response_out, reply.status, &reply.headers, first) else { return };
    // A short file body against its Content-Length makes the host abort the
    // response instead of sending a bad one.
    if let ReplyBody::File { file, len } = reply.body {
        if !body.copy_from(file.take(len)) {
            return;
        }
    }
    body.finish();
}
