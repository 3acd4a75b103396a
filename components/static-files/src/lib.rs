//! The site's static files (route `/...`). A thin shell: every decision is in
//! `static_core::serve`; this file only translates between Spin and it.

use std::io::Read;

use spin_sdk::http::{Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam};
use spin_sdk::http_component;
use static_core::{join_field_values, request_path, serve, Reply, ReplyBody, RequestHead, Site};

/// File reads per write: big writes become few TCP segments (Spin keeps Nagle on).
const READ_CHUNK: usize = 64 * 1024;

/// Writes everything as the host's permits allow, without a flush per piece.
fn write_all(stream: &wasi::io::streams::OutputStream, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        let permit = match stream.check_write() {
            Ok(0) => {
                stream.subscribe().block();
                continue;
            }
            Ok(n) => n as usize,
            Err(_) => return false,
        };
        let n = permit.min(bytes.len());
        if stream.write(&bytes[..n]).is_err() {
            return false;
        }
        bytes = &bytes[n..];
    }
    true
}

#[http_component]
fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
    // Never read the request body: a static GET has none, and a large POST must
    // not be buffered just to be told 405.
    let headers = request.headers();
    let field = |name: &str| join_field_values(&headers.get(name));
    // Spin appends its value after any copy the client sent: the last one is Spin's.
    let path_info = headers.get("spin-path-info").pop().map(|v| String::from_utf8_lossy(&v).into_owned());
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
    let Some((response, body)) =
        response_with_body(&reply).or_else(|| response_with_body(&Reply::internal_error(head_only)))
    else {
        // Unreachable with our fixed headers; dropping the outparam makes the host answer 500.
        return;
    };
    let Ok(stream) = body.write() else { return };
    // A body in memory is queued before the head is handed over, so the runtime can
    // send both in one TCP write: Spin keeps Nagle on, and a body that follows its
    // head in a second small write waits for the client's delayed ACK (~40 ms).
    let mut rest: &[u8] = match &reply.body {
        ReplyBody::Bytes(bytes) => bytes,
        _ => &[],
    };
    if let Ok(permit) = stream.check_write() {
        let n = (permit as usize).min(rest.len());
        if n > 0 && stream.write(&rest[..n]).is_ok() {
            rest = &rest[n..];
        }
    }
    response_out.set(response);
    // Errors past this point can only cut the body short: the Content-Length
    // mismatch makes the host abort the response instead of sending a bad one.
    if write_all(&stream, rest) {
        if let ReplyBody::File { file, len } = reply.body {
            let mut file = file.take(len);
            let mut buffer = vec![0u8; READ_CHUNK];
            loop {
                match file.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if !write_all(&stream, &buffer[..n]) {
                            break;
                        }
                    }
                }
            }
        }
    }
    let _ = stream.blocking_flush();
    // The stream is a child of the body and must be gone before finish.
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
}

fn response_with_body(reply: &Reply) -> Option<(OutgoingResponse, OutgoingBody)> {
    let entries: Vec<(String, Vec<u8>)> =
        reply.headers.iter().map(|(name, value)| ((*name).to_owned(), value.as_bytes().to_vec())).collect();
    let fields = Fields::from_list(&entries).ok()?;
    let response = OutgoingResponse::new(fields);
    response.set_status_code(reply.status).ok()?;
    let body = response.body().ok()?;
    Some((response, body))
}
