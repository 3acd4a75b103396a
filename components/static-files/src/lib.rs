//! The site's static files (route `/...`). A thin shell: every decision is in
//! `static_core::serve`; this file only translates between Spin and it.

use std::io::Read;

use spin_sdk::http::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};
use spin_sdk::http_component;
use static_core::{join_field_values, request_path, serve, Reply, ReplyBody, RequestHead, Site};

/// wasi:io `blocking-write-and-flush` takes at most 4096 bytes per call.
const WRITE_CHUNK: usize = 4096;

#[http_component]
fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
    // Never read the request body: a static GET has none, and a large POST must
    // not be buffered just to be told 405.
    let headers = request.headers();
    let field = |name: &str| join_field_values(&headers.get(name));
    let path_info = field("spin-path-info");
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
    let head_only = method == "HEAD";
    send(reply, response_out, head_only);
}

fn send(reply: Reply, response_out: ResponseOutparam, head_only: bool) {
    let Some((response, body)) = response_with_body(&reply)
        .or_else(|| response_with_body(&Reply::internal_error(head_only)))
    else {
        // Unreachable with our fixed headers; dropping the outparam makes the host answer 500.
        return;
    };
    response_out.set(response);
    let Ok(stream) = body.write() else { return };
    // Errors past this point can only cut the body short: the Content-Length
    // mismatch makes the host abort the response instead of sending a bad one.
    match reply.body {
        ReplyBody::Empty => {}
        ReplyBody::Bytes(bytes) => {
            for chunk in bytes.chunks(WRITE_CHUNK) {
                if stream.blocking_write_and_flush(chunk).is_err() {
                    break;
                }
            }
        }
        ReplyBody::File { file, len } => {
            let mut file = file.take(len);
            let mut buffer = [0u8; WRITE_CHUNK];
            loop {
                match file.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if stream.blocking_write_and_flush(&buffer[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
        }
    }
    // The stream is a child of the body and must be gone before finish.
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
}

fn response_with_body(reply: &Reply) -> Option<(OutgoingResponse, OutgoingBody)> {
    let entries: Vec<(String, Vec<u8>)> = reply
        .headers
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.as_bytes().to_vec()))
        .collect();
    let fields = Fields::from_list(&entries).ok()?;
    let response = OutgoingResponse::new(fields);
    response.set_status_code(reply.status).ok()?;
    let body = response.body().ok()?;
    Some((response, body))
}
