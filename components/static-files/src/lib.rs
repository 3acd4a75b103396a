//! The site's static files (route `/...`). A thin shell: every decision is in
//! `static_core::serve`; this file only translates between Spin and it.

use std::io::Read;

use guest_http::{host_allowed, respond, send_host_not_allowed, spin_header};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use spin_sdk::http_component;
use static_core::{join_field_values, request_path, serve, ReplyBody, RequestHead, Site};

#[http_component]
fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
    if !host_allowed(&request) {
        return send_host_not_allowed(response_out);
    }
    // Never read the request body: a static GET has none, and a large POST must
    // not be buffered just to be told 405.
    let headers = request.headers();
    let field = |name: &str| join_field_values(&headers.get(name));
    let path_info = spin_header(&request, "spin-path-info");
    let path_with_query = request.path_with_query();
    let accept_encoding = field("accept-encoding");
    let if_none_match = field("if-none-match");
    let method = request.method().to_string();

    let head = RequestHead {
        method: &method,
        path: request_path(path_info.as_deref(), path_with_query.as_deref()),
        accept_encoding: accept_encoding.as_deref(),
        if_none_match: if_none_match.as_deref(),
    };
    let reply = serve(&Site::spin_mounts(), &head);
    let first: &[u8] = match &reply.body {
        ReplyBody::Bytes(bytes) => bytes,
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
