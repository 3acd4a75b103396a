//! The same-origin inference pass-through.

use super::*;

async fn inference_via_playground(p: &Playground, body: String) -> Answer {
    let url = p.app.url("/admin/v1/gw/acme/main/v1/chat/completions");
    p.send(
        client().post(url).bearer_auth("myra_from_the_browser").header("content-type", "application/json").body(body),
    )
    .await
}

/// The app with its inference base URL at `addr`.
async fn with_inference_at(name: &str, addr: std::net::SocketAddr) -> Playground {
    Playground::start_with(name, |mut o| {
        o = o
            .variable("inference_base_url", "http://inference.test")
            .variable("inference_origin", "http://inference.test");
        o.redirects.insert("inference.test:80".into(), addr);
        o
    })
    .await
}

fn chat_request(text: &str) -> String {
    json!({ "model": "ratatoskr-small", "stream": true, "messages": [{ "role": "user", "content": text }] }).to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inference_pass_through_sends_the_chat_body_with_a_content_length() {
    const STREAM: &str = concat!(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"fjord ÆØÅ\"}}]}\n\n",
        "data: [DONE]\n\n"
    );
    let strict = MockUpstream::start(|seen| async move {
        if length_missing(&seen) {
            return respond(411, "application/json", "{\"error\":\"length required\"}");
        }
        let mut r = respond(200, "text/event-stream", STREAM);
        r.headers_mut().insert("x-trace-id", "trc_sized".parse().unwrap());
        r
    })
    .await;
    let p = Playground::start_with("inference-length", |o| {
        o.variable("inference_base_url", "http://inference.test/v")
            .variable("inference_origin", "http://inference.test")
            .redirect("inference.test:80", &strict)
    })
    .await;
    let body = chat_request("hvordan er været?");
    let r = inference_via_playground(&p, body.clone()).await;
    r.assert(200, "");
    assert_eq!(r.body, STREAM);
    assert_eq!(r.header("x-trace-id").as_deref(), Some("trc_sized"));
    let seen = strict.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path_and_query.as_str()),
        ("POST", "/v/acme/main/v1/chat/completions")
    );
    assert_eq!(header_of(&seen[0], "authorization").as_deref(), Some("Bearer myra_from_the_browser"));
    assert_eq!(seen[0].body, body.as_bytes());
    assert_sized(&seen[0]);
}

/// An upstream that answers as soon as it has a request's head, never reads the body, and
/// drops the connection a moment later (as a server refusing a request early does). Returns
/// its address and the heads it read.
async fn early_answerer(answer: String) -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (seen, answer) = (seen.clone(), answer.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                seen.lock().unwrap().push(String::from_utf8_lossy(&head).into_owned());
                let _ = socket.write_all(answer.as_bytes()).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                // Dropped with the body unread: the sender's next writes fail.
            });
        }
    });
    (addr, heads)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inference_pass_through_relays_an_answer_that_came_before_the_body_was_read() {
    // The inference endpoint's own refusal shape (the simulator's), passed on unchanged.
    let refusal = r#"{"error":{"code":"invalid_token","message":"the token is not valid for this gateway"}}"#;
    let answer = format!(
        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nx-trace-id: trc_early\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{refusal}",
        refusal.len()
    );
    let (addr, heads) = early_answerer(answer).await;
    let p = with_inference_at("inference-early", addr).await;
    // Larger than the sockets buffer: the upstream hangs up with most of it unread. (The
    // host's outgoing pipe, 2 MiB in wasmtime and in Spin, takes all of a chat body, so the
    // guest's own writes end before that: this pins the relay, it could not fail before.)
    let r = inference_via_playground(&p, chat_request(&"x".repeat(900_000))).await;
    r.assert(401, "");
    assert_eq!(r.body, refusal);
    assert_eq!(r.header("x-trace-id").as_deref(), Some("trc_early"));
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 1);
    assert!(heads[0].to_ascii_lowercase().contains("content-length: "), "{}", heads[0]);
    // A small body the upstream never reads is relayed the same way.
    let r = inference_via_playground(&p, chat_request("hi")).await;
    r.assert(401, "");
    assert_eq!(r.json()["error"]["code"], "invalid_token");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_inference_pass_through_never_relays_html_or_an_untyped_answer() {
    for (head, upstream_status) in [
        ("HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8", 200),
        ("HTTP/1.1 200 OK", 200),
        ("HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/html", 503),
    ] {
        let page = "<script>alert(document.cookie)</script>";
        let answer = format!("{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}", page.len());
        let (addr, _) = early_answerer(answer).await;
        let p = with_inference_at("inference-html", addr).await;
        let r = inference_via_playground(&p, chat_request("hi")).await;
        r.assert(502, "upstream_content_type");
        assert_eq!(r.json()["status"], upstream_status, "{head}");
        assert!(!r.body.contains("<script>"), "{}", r.body);
        assert!(r.header("content-type").unwrap().starts_with("application/json"));
    }
}
