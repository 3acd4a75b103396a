//! The gateway inference endpoint (upstream.md section 3), OpenAI-compatible:
//! `POST /inference/{tenant_slug}/{gateway_slug}/v1/chat/completions` with
//! `Authorization: Bearer myra_<64 hex>` and a chat body `{model?, messages:[{role,
//! content}], stream}`. This module is the pure part: token format and hash, the error
//! bodies, the request body, the scripted reply, the chunk framing and the data of each
//! trace step. The token lookup and the trace writes are in [`crate::ledger`]; the
//! handler plays the script out.
//!
//! - Token refused before any byte: 401 `{"error":{"code":"invalid_token"|"token_expired",
//!   "message"}}`. A bad body (after a valid token) is 400 `invalid_request`.
//! - `stream: true`: 200 `text/event-stream` of `data: <chat.completion.chunk>` frames —
//!   the first delta carries `role` too, then content deltas with small real delays, a
//!   final chunk with `finish_reason: "stop"` and an empty delta, then `data: [DONE]`.
//! - `stream` false or absent: one `chat.completion` JSON object.
//! - Either way the response carries `x-trace-id`; the trace has the steps
//!   `auth` → `route` → `model.request` → `stream` (or `generate`) → `complete`.
//! - Demo switch: a prompt containing `sim:slow` streams at ~0.25–0.5 s per delta.
//!
//! The prompt is untrusted: it only ever travels inside JSON strings (serde-escaped).

use crate::rng::Rng;
use serde_json::{json, Value};

/// The token format and its hash (the `gateway_tokens.token_hash` key) are the contract
/// with the Playground, which mints the tokens: one definition, in `gateway-ledger`.
pub use gateway_ledger::tokens::{is_token, token_hash};
/// The model named in chunks and traces when the request names none.
pub const DEFAULT_MODEL: &str = "sim-chat-1";
pub const MAX_MESSAGES: usize = 256;
pub const MAX_MODEL_CHARS: usize = 128;
/// The prompt is quoted back at most this long.
pub const QUOTE_CHARS: usize = 160;

#[derive(Debug, Clone, PartialEq)]
pub enum InferenceError {
    /// No bearer, not a `myra_` token, unknown, or bound to another tenant/gateway.
    InvalidToken(&'static str),
    /// Known, for this gateway, but `expires_at <= now`.
    TokenExpired,
    BadRequest(String),
    Internal,
}

impl InferenceError {
    pub fn status(&self) -> u16 {
        match self {
            InferenceError::InvalidToken(_) | InferenceError::TokenExpired => 401,
            InferenceError::BadRequest(_) => 400,
            InferenceError::Internal => 500,
        }
    }

    /// `{"error":{"code","message"}}`; never contains the token or its hash.
    pub fn body(&self) -> Value {
        let (code, message) = match self {
            InferenceError::InvalidToken(m) => ("invalid_token", (*m).to_owned()),
            InferenceError::TokenExpired => {
                ("token_expired", "the gateway token has expired; mint a new one".to_owned())
            }
            InferenceError::BadRequest(m) => ("invalid_request", m.clone()),
            InferenceError::Internal => ("internal_error", "the simulator could not answer".to_owned()),
        };
        json!({ "error": { "code": code, "message": message } })
    }
}

/// The token of the request's `Authorization` values: exactly one `Bearer myra_…`.
pub fn request_token(auth_values: &[Vec<u8>]) -> Result<String, InferenceError> {
    let key = crate::providers::bearer_key(auth_values)
        .ok_or(InferenceError::InvalidToken("a Bearer gateway token is required"))?;
    if is_token(&key) {
        Ok(key)
    } else {
        Err(InferenceError::InvalidToken("the bearer is not a gateway token"))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub stream: bool,
}

impl ChatRequest {
    /// The last user message.
    pub fn prompt(&self) -> &str {
        self.messages.iter().rev().find(|m| m.role == "user").map_or("", |m| m.content.as_str())
    }
}

fn bad(m: &str) -> InferenceError {
    InferenceError::BadRequest(m.to_owned())
}

/// `content` as a string: a string, null (""), or an array of `{type:"text", text}` parts.
fn content_text(v: Option<&Value>) -> Result<String, InferenceError> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    _ => return Err(bad("only text content parts are supported")),
                }
            }
            Ok(out)
        }
        Some(_) => Err(bad("message content must be a string or a list of text parts")),
    }
}

pub fn parse_chat(body: &[u8]) -> Result<ChatRequest, InferenceError> {
    let obj = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => o,
        Ok(_) => return Err(bad("body must be a JSON object")),
        Err(_) => return Err(bad("body is not valid JSON")),
    };
    let model = match obj.get("model") {
        None | Some(Value::Null) => DEFAULT_MODEL.to_owned(),
        Some(Value::String(m)) if m.trim().is_empty() => DEFAULT_MODEL.to_owned(),
        Some(Value::String(m)) if m.chars().count() <= MAX_MODEL_CHARS => m.clone(),
        Some(_) => return Err(bad("model must be a string of at most 128 characters")),
    };
    let stream = match obj.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("stream must be a boolean")),
    };
    let list = match obj.get("messages") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        _ => return Err(bad("messages must be a non-empty list")),
    };
    if list.len() > MAX_MESSAGES {
        return Err(bad("too many messages"));
    }
    let mut messages = Vec::with_capacity(list.len());
    for m in list {
        let role = match m.get("role").and_then(Value::as_str) {
            Some(r @ ("system" | "developer" | "user" | "assistant" | "tool")) => r.to_owned(),
            _ => return Err(bad("every message needs a role: system, developer, user, assistant or tool")),
        };
        messages.push(Message { role, content: content_text(m.get("content"))? });
    }
    if !messages.iter().any(|m| m.role == "user") {
        return Err(bad("messages must include a user message"));
    }
    Ok(ChatRequest { model, messages, stream })
}

/// One content delta and the wait before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    pub delay_ms: u64,
    pub text: String,
}

fn quote(prompt: &str) -> String {
    let p = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    if p.chars().count() <= QUOTE_CHARS {
        p
    } else {
        let cut: String = p.chars().take(QUOTE_CHARS).collect();
        format!("{}…", cut.trim_end())
    }
}

const OPENERS: &[&str] = &[
    "Here is a simulated answer",
    "Good question — this reply comes",
    "Short answer first, from the simulator",
    "Answering",
];

const SENTENCES: &[&str] = &[
    "A real model would reason about this step by step; the simulator only shows how the stream behaves.",
    "Each piece of this reply arrives as its own chunk, with a short pause in between, like a live model.",
    "The request was authenticated with a short-lived Playground token bound to this gateway.",
    "Open the trace to see the authentication, routing, model request and streaming steps with their timings.",
    "Tokens expire thirty minutes after they are minted; a lapsed token is refused before any byte streams.",
    "Nothing here left the built-in simulator: no prompt was sent to an outside service.",
];

/// The whole reply text for a prompt (stable for a given RNG seed).
pub fn reply_text(prompt: &str, tenant: &str, gateway: &str, model: &str, rng: &mut Rng) -> String {
    let opener = rng.pick(OPENERS);
    let first = rng.range(0, SENTENCES.len() as u64) as usize;
    let second = (first + 1 + rng.range(0, SENTENCES.len() as u64 - 1) as usize) % SENTENCES.len();
    format!(
        "{opener} from {tenant}/{gateway} ({model}). You asked: \u{201c}{}\u{201d}. {} {}",
        quote(prompt),
        SENTENCES[first],
        SENTENCES[second],
    )
}

/// Splits `text` into deltas of 1–3 words (each keeps its trailing space, so the deltas
/// concatenate to `text` exactly), with the delays to wait before each.
pub fn script(text: &str, slow: bool, rng: &mut Rng) -> Vec<Delta> {
    let mut words: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == ' ' {
            words.push(&text[start..i + 1]);
            start = i + 1;
        }
    }
    if start < text.len() {
        words.push(&text[start..]);
    }
    let mut deltas = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let n = (rng.range(1, 4) as usize).min(words.len() - i);
        let piece: String = words[i..i + n].concat();
        let delay_ms = match (slow, deltas.is_empty()) {
            (true, _) => rng.range(250, 500),
            (false, true) => rng.range(80, 160),
            (false, false) => rng.range(15, 45),
        };
        deltas.push(Delta { delay_ms, text: piece });
        i += n;
    }
    deltas
}

pub fn slow_requested(prompt: &str) -> bool {
    prompt.to_ascii_lowercase().contains("sim:slow")
}

/// `chatcmpl-` + 24 hex digits.
pub fn completion_id(rng: &mut Rng) -> String {
    format!("chatcmpl-{}", rng.hex(12))
}

/// `trc_` + 24 hex digits (the Playground's trace id style and alphabet).
pub fn trace_id(rng: &mut Rng) -> String {
    format!("trc_{}", rng.hex(12))
}

/// One `chat.completion.chunk`.
pub fn chunk(id: &str, created_s: u64, model: &str, delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": created_s,
        "model": model,
        "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }],
    })
}

/// The content chunk for delta number `index` (the first also names the role).
pub fn content_chunk(id: &str, created_s: u64, model: &str, index: usize, text: &str) -> Value {
    let delta = if index == 0 { json!({ "role": "assistant", "content": text }) } else { json!({ "content": text }) };
    chunk(id, created_s, model, delta, None)
}

pub fn stop_chunk(id: &str, created_s: u64, model: &str) -> Value {
    chunk(id, created_s, model, json!({}), Some("stop"))
}

/// A rough token count (about four characters per token), for `usage`.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn of(req: &ChatRequest, reply: &str) -> Usage {
        Usage {
            prompt_tokens: req.messages.iter().map(|m| estimate_tokens(&m.content) + 4).sum(),
            completion_tokens: estimate_tokens(reply),
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        })
    }
}

/// The non-streaming answer.
pub fn completion(id: &str, created_s: u64, model: &str, reply: &str, usage: &Usage) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": created_s,
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": reply },
            "finish_reason": "stop",
        }],
        "usage": usage.json(),
    })
}

/// One trace step, as written to `trace_steps` (times in unix ms).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: &'static str,
    pub started_at_ms: u64,
    pub ended_at_ms: u64,
    pub data: Value,
}

/// What the trace steps describe about the request.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceFacts<'a> {
    pub tenant_slug: &'a str,
    pub gateway_slug: &'a str,
    pub gateway_id: &'a str,
    pub token_kind: &'a str,
    pub token_expires_at_s: i64,
    pub request: &'a ChatRequest,
    pub completion_id: &'a str,
}

/// `auth`: the token was found, is for this gateway and unexpired. Never the token itself.
pub fn auth_step(f: &TraceFacts, started_ms: u64, ended_ms: u64) -> Step {
    Step {
        name: "auth",
        started_at_ms: started_ms,
        ended_at_ms: ended_ms,
        data: json!({
            "result": "ok",
            "token_kind": f.token_kind,
            "token_expires_at": crate::time::rfc3339_millis(f.token_expires_at_s.max(0) as u64 * 1000),
            "tenant_slug": f.tenant_slug,
            "gateway_slug": f.gateway_slug,
        }),
    }
}

/// `route`: which gateway and upstream answer.
pub fn route_step(f: &TraceFacts, started_ms: u64, ended_ms: u64) -> Step {
    Step {
        name: "route",
        started_at_ms: started_ms,
        ended_at_ms: ended_ms,
        data: json!({
            "tenant_slug": f.tenant_slug,
            "gateway_slug": f.gateway_slug,
            "gateway_id": f.gateway_id,
            "upstream": "simulator",
            "model": f.request.model,
        }),
    }
}

/// `model.request`: what was asked, the prompt included.
pub fn model_request_step(f: &TraceFacts, started_ms: u64, ended_ms: u64) -> Step {
    let messages: Vec<Value> =
        f.request.messages.iter().map(|m| json!({ "role": m.role, "content": m.content })).collect();
    Step {
        name: "model.request",
        started_at_ms: started_ms,
        ended_at_ms: ended_ms,
        data: json!({
            "model": f.request.model,
            "stream": f.request.stream,
            "prompt": f.request.prompt(),
            "messages": messages,
            "completion_id": f.completion_id,
        }),
    }
}

/// `stream` (or `generate` when not streaming): the response text as it was sent.
/// `finished` is false when the client went away mid-stream.
pub fn response_step(
    streamed: bool,
    started_ms: u64,
    ended_ms: u64,
    first_delta_ms: Option<u64>,
    chunks: usize,
    sent_text: &str,
    finished: bool,
) -> Step {
    let mut data = json!({
        "response": sent_text,
        "chunks": chunks,
        "finished": finished,
    });
    if let Some(first) = first_delta_ms {
        data["time_to_first_token_ms"] = json!(first.saturating_sub(started_ms));
    }
    Step { name: if streamed { "stream" } else { "generate" }, started_at_ms: started_ms, ended_at_ms: ended_ms, data }
}

/// `complete`: how it ended.
pub fn complete_step(at_ms: u64, request_started_ms: u64, finish_reason: &str, usage: &Usage) -> Step {
    Step {
        name: "complete",
        started_at_ms: at_ms,
        ended_at_ms: at_ms,
        data: json!({
            "finish_reason": finish_reason,
            "usage": usage.json(),
            "duration_ms": at_ms.saturating_sub(request_started_ms),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "myra_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    #[test]
    fn token_format() {
        assert!(is_token(TOKEN));
        assert!(!is_token(&TOKEN.to_uppercase()));
        assert!(!is_token(&TOKEN.replace("myra_", "MYRA_")));
        assert!(!is_token(&TOKEN[..TOKEN.len() - 1]));
        assert!(!is_token(&format!("{TOKEN}0")));
        assert!(!is_token(&TOKEN.replace('f', "g")));
        assert!(!is_token("myra_"));
        assert!(!is_token(""));
    }

    #[test]
    fn token_hash_is_sha256_hex_of_the_whole_token() {
        // Known vectors.
        assert_eq!(token_hash(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let h = token_hash(TOKEN);
        assert_eq!(h.len(), 64);
        assert!(h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(h, token_hash(&TOKEN[5..]), "the prefix is hashed too");
    }

    #[test]
    fn request_tokens() {
        let h = |s: &str| vec![s.as_bytes().to_vec()];
        assert_eq!(request_token(&h(&format!("Bearer {TOKEN}"))), Ok(TOKEN.to_owned()));
        assert_eq!(request_token(&h(&format!("bearer  {TOKEN} "))), Ok(TOKEN.to_owned()));
        for bad in
            [String::new(), TOKEN.to_owned(), format!("Basic {TOKEN}"), "Bearer myra_12".into(), "Bearer sk-abc".into()]
        {
            let err = request_token(&h(&bad)).unwrap_err();
            assert_eq!(err.status(), 401);
            assert_eq!(err.body()["error"]["code"], "invalid_token");
        }
        assert!(request_token(&[]).is_err());
        let twice = vec![format!("Bearer {TOKEN}").into_bytes(); 2];
        assert!(request_token(&twice).is_err());
    }

    #[test]
    fn error_bodies() {
        let e = InferenceError::TokenExpired;
        assert_eq!((e.status(), e.body()["error"]["code"].as_str()), (401, Some("token_expired")));
        let keys: Vec<_> = e.body()["error"].as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["code", "message"]);
        assert_eq!(InferenceError::BadRequest("x".into()).status(), 400);
        assert_eq!(InferenceError::Internal.status(), 500);
    }

    #[test]
    fn chat_bodies() {
        let r = parse_chat(
            br#"{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"stream":true}"#,
        )
        .unwrap();
        assert_eq!(r.model, DEFAULT_MODEL);
        assert!(r.stream);
        assert_eq!(r.prompt(), "hi");
        let r = parse_chat(br#"{"model":"m1","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null},{"role":"user","content":"last"}]}"#).unwrap();
        assert_eq!((r.model.as_str(), r.stream, r.prompt()), ("m1", false, "last"));
        assert_eq!(r.messages[0].content, "ab");
        for bad in [
            &b"nope"[..],
            b"[]",
            b"{}",
            br#"{"messages":[]}"#,
            br#"{"messages":"hi"}"#,
            br#"{"messages":[{"content":"x"}]}"#,
            br#"{"messages":[{"role":"wizard","content":"x"}]}"#,
            br#"{"messages":[{"role":"system","content":"x"}]}"#,
            br#"{"messages":[{"role":"user","content":5}]}"#,
            br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
            br#"{"messages":[{"role":"user","content":"x"}],"stream":"yes"}"#,
            br#"{"messages":[{"role":"user","content":"x"}],"model":7}"#,
        ] {
            let e = parse_chat(bad).unwrap_err();
            assert_eq!(e.status(), 400, "{}", String::from_utf8_lossy(bad));
            assert_eq!(e.body()["error"]["code"], "invalid_request");
        }
        let long_model = json!({"model": "m".repeat(129), "messages": [{"role": "user", "content": "x"}]});
        assert!(parse_chat(long_model.to_string().as_bytes()).is_err());
    }

    #[test]
    fn the_script_concatenates_to_the_reply_and_has_small_delays() {
        let mut rng = Rng::new(9);
        let prompt = "What is <b>Rust</b>?\nTell me \"everything\"";
        let text = reply_text(prompt, "acme", "main", "m1", &mut rng);
        assert!(text.contains("acme/main (m1)"));
        assert!(text.contains("What is <b>Rust</b>? Tell me \"everything\""), "{text}");
        let deltas = script(&text, false, &mut rng);
        assert!(deltas.len() >= 10, "{deltas:?}");
        assert_eq!(deltas.iter().map(|d| d.text.as_str()).collect::<String>(), text);
        assert!(deltas.iter().all(|d| !d.text.is_empty()));
        assert!((80..160).contains(&deltas[0].delay_ms));
        assert!(deltas[1..].iter().all(|d| (15..45).contains(&d.delay_ms)));
        let total: u64 = deltas.iter().map(|d| d.delay_ms).sum();
        assert!(total < 4_000, "{total}");
        let slow = script(&text, true, &mut rng);
        assert!(slow.iter().all(|d| (250..500).contains(&d.delay_ms)));
        assert!(slow_requested("please SIM:SLOW"));
        assert!(!slow_requested("slow"));
        // Stable for a seed.
        assert_eq!(reply_text("x", "a", "b", "c", &mut Rng::new(1)), reply_text("x", "a", "b", "c", &mut Rng::new(1)));
        // Long prompts are quoted shortened.
        let long = "word ".repeat(200);
        let t = reply_text(&long, "a", "b", "c", &mut Rng::new(2));
        assert!(t.contains('…') && t.len() < 1_000);
        assert_eq!(script("", false, &mut rng), vec![]);
        assert_eq!(script("one", false, &mut rng).len(), 1);
    }

    #[test]
    fn chunk_framing() {
        let first = content_chunk("chatcmpl-1", 1_700_000_000, "m", 0, "Hel");
        assert_eq!(
            crate::sse::data_frame(&first),
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\",\"role\":\"assistant\"},\"finish_reason\":null,\"index\":0}],\"created\":1700000000,\"id\":\"chatcmpl-1\",\"model\":\"m\",\"object\":\"chat.completion.chunk\"}\n\n"
        );
        let next = content_chunk("chatcmpl-1", 1, "m", 1, "lo\n\ndata: [DONE]\r\n");
        let frame = crate::sse::data_frame(&next);
        assert_eq!(frame.matches('\n').count(), 2, "{frame:?}");
        assert!(frame.starts_with("data: {") && frame.ends_with("}\n\n"));
        assert!(next["choices"][0]["delta"].get("role").is_none());
        let stop = stop_chunk("chatcmpl-1", 1, "m");
        assert_eq!(stop["choices"][0]["finish_reason"], "stop");
        assert_eq!(stop["choices"][0]["delta"], json!({}));
        assert_eq!(crate::sse::DONE, "data: [DONE]\n\n");
        let mut rng = Rng::new(3);
        let id = completion_id(&mut rng);
        assert!(id.starts_with("chatcmpl-") && id.len() == 33);
        let tid = trace_id(&mut rng);
        assert!(tid.starts_with("trc_") && tid.len() == 28);
        assert!(tid.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'));
    }

    #[test]
    fn completion_and_usage() {
        let req = parse_chat(br#"{"messages":[{"role":"user","content":"12345678"}]}"#).unwrap();
        let usage = Usage::of(&req, "abcd");
        assert_eq!(usage, Usage { prompt_tokens: 6, completion_tokens: 1 });
        let c = completion("chatcmpl-1", 5, "m", "abcd", &usage);
        assert_eq!(c["object"], "chat.completion");
        assert_eq!(c["choices"][0]["message"]["content"], "abcd");
        assert_eq!(c["usage"]["total_tokens"], 7);
    }

    #[test]
    fn trace_steps() {
        let req = parse_chat(br#"{"model":"m1","messages":[{"role":"user","content":"hello <there>"}],"stream":true}"#)
            .unwrap();
        let facts = TraceFacts {
            tenant_slug: "acme",
            gateway_slug: "main",
            gateway_id: "gw_1",
            token_kind: "playground",
            token_expires_at_s: 1_700_001_800,
            request: &req,
            completion_id: "chatcmpl-1",
        };
        let auth = auth_step(&facts, 10, 12);
        assert_eq!((auth.name, auth.started_at_ms, auth.ended_at_ms), ("auth", 10, 12));
        assert_eq!(auth.data["token_expires_at"], "2023-11-14T22:43:20.000Z");
        assert!(!auth.data.to_string().contains("myra_"));
        let route = route_step(&facts, 12, 13);
        assert_eq!(route.data["gateway_id"], "gw_1");
        let model = model_request_step(&facts, 13, 13);
        assert_eq!(model.name, "model.request");
        assert_eq!(model.data["prompt"], "hello <there>");
        assert_eq!(model.data["messages"][0]["role"], "user");
        let stream = response_step(true, 20, 90, Some(35), 4, "Hi there", true);
        assert_eq!(stream.name, "stream");
        assert_eq!(stream.data["response"], "Hi there");
        assert_eq!(stream.data["time_to_first_token_ms"], 15);
        assert_eq!(response_step(false, 1, 2, None, 1, "x", true).name, "generate");
        let usage = Usage::of(&req, "Hi there");
        let done = complete_step(95, 10, "stop", &usage);
        assert_eq!((done.name, done.data["duration_ms"].as_u64()), ("complete", Some(85)));
        assert_eq!(done.data["finish_reason"], "stop");
    }
}
