//! A probe for the host tests. Each path under the component's route reports
//! one capability as Spin gives it to a guest:
//!
//! - `/headers`: the request headers as JSON (a repeated header: its last value)
//! - `/header-values?<name>`: every value of one header, in order, as a JSON array
//! - `/var?<name>`: `fermyon:spin/variables.get(name)`
//! - `/file?<path>`: read a file from the component's mounts
//! - `/kv?<op>&<key>&<value>`: the default key-value store
//! - `/fetch?<url>`: GET `url` and stream its body back chunk by chunk
//! - `/fetch-whole?<url>`: GET `url` and answer its whole body at once: the
//!   least a guest can do to proxy a small answer (the benches' floor)
//! - `/echo`: stream the request body back as it arrives
//! - `/sqlite?<database>&<statement>&<text params>...`: one statement, rows as JSON
//! - `/now`: the wall clock in whole seconds since the epoch
//! - `/after?<key>`: answer `sent`, then, 200 ms after the response has ended,
//!   set `<key>` to `done` in the default store (work after the response)

use futures::{SinkExt, StreamExt};
use spin_sdk::http::{Fields, IncomingRequest, IncomingResponse, Method, OutgoingResponse, Request, ResponseOutparam};
use spin_sdk::http_component;

fn query_parts(req: &IncomingRequest) -> Vec<String> {
    let path = req.path_with_query().unwrap_or_default();
    let raw = path.split_once('?').map(|(_, q)| q).unwrap_or("");
    // The project's strict codec; a part that does not decode is passed on as sent.
    raw.split('&').filter(|s| !s.is_empty()).map(|s| query::percent_decode(s).unwrap_or_else(|| s.to_owned())).collect()
}

async fn reply(out: ResponseOutparam, status: u16, body: String) {
    let headers = Fields::from_list(&[("content-type".to_string(), b"text/plain".to_vec())]).unwrap();
    let response = OutgoingResponse::new(headers);
    response.set_status_code(status).unwrap();
    let _ = out.set_with_body(response, body.into_bytes()).await;
}

/// GET the URL in the query's first part.
async fn get(args: &[String]) -> Result<IncomingResponse, String> {
    let url = args.first().cloned().unwrap_or_default();
    let request = Request::builder().method(Method::Get).uri(url).build();
    spin_sdk::http::send(request).await.map_err(|e| format!("{e:?}"))
}

/// A response head for relayed bytes, with `status`.
fn octet_stream(status: u16) -> OutgoingResponse {
    let headers = Fields::from_list(&[("content-type".to_string(), b"application/octet-stream".to_vec())]).unwrap();
    let response = OutgoingResponse::new(headers);
    response.set_status_code(status).unwrap();
    response
}

#[http_component]
async fn handle(req: IncomingRequest, out: ResponseOutparam) {
    let path_info =
        req.headers().get("spin-path-info").last().map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
    let args = query_parts(&req);
    match path_info.as_str() {
        "/headers" => {
            let map: serde_json::Map<String, serde_json::Value> = req
                .headers()
                .entries()
                .into_iter()
                .map(|(k, v)| (k, serde_json::Value::String(String::from_utf8_lossy(&v).into_owned())))
                .collect();
            reply(out, 200, serde_json::Value::Object(map).to_string()).await
        }
        "/header-values" => {
            let values: Vec<String> = req
                .headers()
                .get(args.first().map(String::as_str).unwrap_or(""))
                .iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect();
            reply(out, 200, serde_json::json!(values).to_string()).await
        }
        "/var" => match spin_sdk::variables::get(args.first().map(String::as_str).unwrap_or("")) {
            Ok(value) => reply(out, 200, value).await,
            Err(e) => reply(out, 404, format!("{e:?}")).await,
        },
        "/file" => match std::fs::read_to_string(args.first().map(String::as_str).unwrap_or("")) {
            Ok(text) => reply(out, 200, text).await,
            Err(e) => reply(out, 404, format!("{:?}", e.kind())).await,
        },
        "/kv" => {
            let result = (|| -> anyhow::Result<String> {
                let store = spin_sdk::key_value::Store::open_default()?;
                let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
                Ok(match arg(0).as_str() {
                    "set" => store.set(&arg(1), arg(2).as_bytes()).map(|_| "ok".to_string())?,
                    "get" => store
                        .get(&arg(1))?
                        .map(|v| String::from_utf8_lossy(&v).into_owned())
                        .unwrap_or_else(|| "<none>".into()),
                    "open" => spin_sdk::key_value::Store::open(&arg(1)).map(|_| "ok".to_string())?,
                    other => anyhow::bail!("unknown op {other}"),
                })
            })();
            match result {
                Ok(text) => reply(out, 200, text).await,
                Err(e) => reply(out, 500, format!("{e:?}")).await,
            }
        }
        "/fetch" => {
            let upstream = match get(&args).await {
                Ok(r) => r,
                Err(e) => return reply(out, 502, e).await,
            };
            let response = octet_stream(upstream.status());
            let mut body = response.take_body();
            out.set(response);
            // Keep `upstream` alive while streaming (dropping it cancels the request).
            let mut chunks = upstream.take_body_stream();
            while let Some(Ok(chunk)) = chunks.next().await {
                if body.send(chunk).await.is_err() {
                    return;
                }
            }
        }
        "/fetch-whole" => {
            let upstream = match get(&args).await {
                Ok(r) => r,
                Err(e) => return reply(out, 502, e).await,
            };
            let status = upstream.status();
            let Ok(body) = upstream.into_body().await else { return reply(out, 502, "body".into()).await };
            let _ = out.set_with_body(octet_stream(status), body).await;
        }
        "/echo" => {
            let response = OutgoingResponse::new(Fields::new());
            response.set_status_code(200).unwrap();
            let mut body = response.take_body();
            out.set(response);
            let mut chunks = req.into_body_stream();
            while let Some(Ok(chunk)) = chunks.next().await {
                if body.send(chunk).await.is_err() {
                    return;
                }
            }
        }
        "/sqlite" => {
            let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
            let params: Vec<spin_sdk::sqlite3::Value> =
                args.iter().skip(2).map(|p| spin_sdk::sqlite3::Value::Text(p.clone())).collect();
            let result = spin_sdk::sqlite3::Connection::open(&arg(0)).and_then(|db| db.execute(&arg(1), &params));
            match result {
                Ok(rows) => {
                    let rows: Vec<Vec<String>> =
                        rows.rows.iter().map(|r| r.values.iter().map(|v| format!("{v:?}")).collect()).collect();
                    reply(out, 200, serde_json::json!({ "columns": rows.len(), "rows": rows }).to_string()).await
                }
                Err(e) => reply(out, 500, format!("{e:?}")).await,
            }
        }
        "/now" => {
            let secs =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            reply(out, 200, secs.to_string()).await
        }
        "/after" => {
            reply(out, 200, "sent".to_string()).await;
            // The guest waits with its response over, then works on.
            wasi::clocks::monotonic_clock::subscribe_duration(200_000_000).block();
            let key = args.first().cloned().unwrap_or_default();
            if let Ok(store) = spin_sdk::key_value::Store::open_default() {
                let _ = store.set(&key, b"done");
            }
        }
        _ => reply(out, 404, "unknown probe".to_string()).await,
    }
}
