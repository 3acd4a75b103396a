//! Fake web-search providers for the Playground (upstream.md section 3): Brave (US) and
//! Linkup (EU), with scripted failures so every error class downstream can be tested and
//! demonstrated without an outside service.
//!
//! - Brave:  `GET /brave/res/v1/web/search?q=…&count=N`, header `X-Subscription-Token`.
//!   200 `{"type":"search","query":{…},"web":{"type":"search","results":[{title,url,
//!   description,…}]}}`, `min(count, 10)` results (`count` 1–20, default 10).
//! - Linkup: `POST /linkup/v1/search` `{"q","depth":"standard"|"deep","outputType":
//!   "searchResults"}`, header `Authorization: Bearer <key>`. 200 `{"results":[{type,name,
//!   url,content}]}`, [`LINKUP_RESULTS`] results; any other body shape is 400.
//!
//! Any non-empty key is accepted, except the revoked ones below. The errors carry each
//! provider's own error shape (Brave `{"type":"ErrorResponse","error":{status,code,detail}}`,
//! Linkup `{"statusCode","error":{code,message,details}}`).
//!
//! Failure switches (after authentication; matched case-insensitively anywhere in `q`; when
//! several failures appear the earliest in the text wins, `sim:slow` combines with any):
//! - missing key                -> 401;
//! - key `brave-revoked-key` (Brave) / `linkup-revoked-key` (Linkup) -> 403;
//! - `sim:401`       -> 401 (the provider rejects the key);
//! - `sim:429`       -> 429 with `Retry-After: 7`;
//! - `sim:500`       -> 500;
//! - `sim:malformed` -> 200 `application/json` whose body is truncated, not JSON;
//! - `sim:empty`     -> 200 with no results;
//! - `sim:slow`      -> the answer (whatever it is) leaves after 10 s.
//!
//! Results are derived from the query (minus its switch words) and stable for a given
//! query. The third result carries HTML-ish text (tags, a `<script>`, entities, quotes and an
//! `&` in its URL) so the console's escaping is exercised; the query itself is echoed only
//! inside JSON strings.

use crate::rng::{hash_str, Rng};
use crate::routes::query_param;
use serde_json::{json, Value};

/// Brave never returns more than this many results here.
pub const MAX_BRAVE_RESULTS: usize = 10;
/// Brave's own limit on `count`.
pub const MAX_BRAVE_COUNT: u32 = 20;
/// Results in every Linkup answer.
pub const LINKUP_RESULTS: usize = 7;
/// `sim:slow` holds the answer this long.
pub const SLOW_DELAY_MS: u64 = 10_000;
/// `Retry-After` of the `sim:429` answer.
pub const RETRY_AFTER_S: u64 = 7;
/// Longest accepted query (Brave's limit).
pub const MAX_QUERY_CHARS: usize = 400;
pub const BRAVE_REVOKED_KEY: &str = "brave-revoked-key";
pub const LINKUP_REVOKED_KEY: &str = "linkup-revoked-key";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Unauthorized,
    RateLimited,
    ServerError,
    Malformed,
    Empty,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Switches {
    pub slow: bool,
    pub failure: Option<Failure>,
}

const FAILURE_WORDS: [(&str, Failure); 5] = [
    ("sim:401", Failure::Unauthorized),
    ("sim:429", Failure::RateLimited),
    ("sim:500", Failure::ServerError),
    ("sim:malformed", Failure::Malformed),
    ("sim:empty", Failure::Empty),
];

/// The failure switches in a query.
pub fn switches(q: &str) -> Switches {
    let lower = q.to_ascii_lowercase();
    let failure = FAILURE_WORDS
        .iter()
        .filter_map(|(word, f)| lower.find(word).map(|at| (at, *f)))
        .min_by_key(|(at, _)| *at)
        .map(|(_, f)| f);
    Switches { slow: lower.contains("sim:slow"), failure }
}

/// The query without its `sim:` words, whitespace collapsed; `search` when nothing is left.
pub fn topic(q: &str) -> String {
    let words: Vec<&str> = q.split_whitespace().filter(|w| !w.to_ascii_lowercase().starts_with("sim:")).collect();
    if words.is_empty() {
        "search".to_owned()
    } else {
        words.join(" ")
    }
}

/// A provider answer, ready for the handler to send after `delay_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    /// Every header, `content-type` included.
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    pub delay_ms: u64,
}

impl Reply {
    fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", "application/json".to_owned())],
            body: serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec()),
            delay_ms: 0,
        }
    }

    fn malformed(prefix: &str) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type", "application/json".to_owned())],
            body: prefix.as_bytes().to_vec(),
            delay_ms: 0,
        }
    }

    fn with_header(mut self, name: &'static str, value: String) -> Reply {
        self.headers.push((name, value));
        self
    }

    /// The body as JSON (tests).
    pub fn json_body(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One generated result, before a provider shapes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub title: String,
    pub url: String,
    /// Brave's short description: the topic wrapped in `<strong>`, as Brave highlights.
    pub description: String,
    /// Linkup's longer plain-text content.
    pub content: String,
}

/// Lowercase ASCII words joined by `-` (only `[a-z0-9-]`); `search` when empty.
pub fn slug(topic: &str) -> String {
    let words: Vec<String> = topic
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(8)
        .map(|w| w.to_ascii_lowercase())
        .collect();
    if words.is_empty() {
        "search".to_owned()
    } else {
        words.join("-")
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn wiki_title(topic: &str) -> String {
    let words: Vec<String> = topic
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(8)
        .enumerate()
        .map(|(i, w)| {
            let w = w.to_ascii_lowercase();
            if i == 0 {
                capitalized(&w)
            } else {
                w
            }
        })
        .collect();
    if words.is_empty() {
        "Search".to_owned()
    } else {
        words.join("_")
    }
}

const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

fn base36(mut n: u64, digits: usize) -> String {
    let mut out = vec![b'0'; digits];
    for slot in out.iter_mut().rev() {
        *slot = BASE36[(n % 36) as usize];
        n /= 36;
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The index of the HTML-ish result in every list.
pub const HTML_HIT: usize = 2;

/// Up to [`MAX_BRAVE_RESULTS`] results about `topic`, stable for a given topic.
pub fn hits(topic: &str, n: usize) -> Vec<Hit> {
    let mut rng = Rng::new(hash_str(topic));
    let t = topic;
    let big = capitalized(topic);
    let s = slug(topic);
    let strong = format!("<strong>{t}</strong>");
    let so_id = rng.range(10_000_000, 79_999_999);
    let answers = rng.range(2, 40);
    let repos = rng.range(12, 4_000);
    let hn_id = rng.range(38_000_000, 45_000_000);
    let points = rng.range(40, 900);
    let reddit = base36(rng.next_u64(), 7);
    let medium = rng.hex(6);
    let minutes = rng.range(4, 14);
    let authors = ["ada.lindqvist", "tomasz.w", "priya.codes", "jonas.eriksen", "mei.tanaka"];
    let author = *rng.pick(&authors);
    let subs = ["explainlikeimfive", "AskScience", "learnprogramming", "technology", "AskHistorians"];
    let sub = *rng.pick(&subs);

    // (title, url, description with `{S}` for the highlighted topic, extra Linkup sentence)
    let all: Vec<(String, String, String, String)> = vec![
        (
            format!("{big} - Wikipedia"),
            format!("https://en.wikipedia.org/wiki/{}", wiki_title(topic)),
            "{S} is a subject with a long history. This article covers its origins, the main ideas behind it and how it is used today.".into(),
            "The article is maintained by volunteers and cites more than forty sources; sections cover terminology, history, current practice and criticism.".into(),
        ),
        (
            format!("What is {t}? A beginner's guide"),
            format!("https://www.freecodecamp.org/news/{s}-beginners-guide/"),
            "Learn the basics of {S} step by step, with examples you can try yourself and the pitfalls to avoid.".into(),
            "The guide starts from first principles, then walks through three worked examples and closes with a checklist for going further.".into(),
        ),
        (
            format!("{big} <b>Q&A</b> &amp; \"discussion\" <script>alert('title')</script>"),
            format!("https://forum.example.org/t/{s}?page=1&sort=latest"),
            "Threads about {S} & related questions: <script>alert(\"xss\")</script><img src=x onerror=\"alert(1)\"> &lt;not a tag&gt; 'quoted' </description>".into(),
            "<p onclick=\"alert(2)\">Community answers</p> & moderator notes; <a href=\"javascript:alert(3)\">open</a>".into(),
        ),
        (
            format!("{t} - Stack Overflow"),
            format!("https://stackoverflow.com/questions/{so_id}/{s}"),
            format!("I'm trying to understand {{S}} but the documentation is unclear. What is the idiomatic approach? {answers} answers."),
            "The accepted answer recommends starting from the smallest working example and measuring before optimising.".into(),
        ),
        (
            format!("{t} · GitHub Topics"),
            format!("https://github.com/topics/{s}"),
            format!("Here are {repos} public repositories matching this topic: {{S}}. Sort by most stars, recently updated or best match."),
            "Popular repositories include libraries, command-line tools and curated lists of learning resources.".into(),
        ),
        (
            format!("{big} explained in {minutes} minutes | Medium"),
            format!("https://medium.com/@{author}/{s}-{medium}"),
            "A short, practical explanation of {S}, with diagrams and a list of further reading.".into(),
            format!("Written by {author}; a {minutes} minute read that has been shared widely since it was published."),
        ),
        (
            format!("r/{sub} - Can someone explain {t}?"),
            format!("https://www.reddit.com/r/{sub}/comments/{reddit}/{}/", s.replace('-', "_")),
            "I keep hearing about {S} and still do not get it. Could someone explain it simply?".into(),
            "The top comment uses an everyday analogy; several replies add corrections and links to longer introductions.".into(),
        ),
        (
            format!("The state of {t} in 2026 | Hacker News"),
            format!("https://news.ycombinator.com/item?id={hn_id}"),
            format!("{points} points · Discussion about {{S}}: what changed this year, what did not, and what people are building."),
            "Commenters compare approaches, share war stories from production and argue about naming.".into(),
        ),
        (
            format!("{big} | Definition, history and facts | Britannica"),
            format!("https://www.britannica.com/topic/{s}"),
            "{S}, overview of the concept, its development over time and its significance.".into(),
            "The entry was reviewed by the editors and includes a timeline and a short bibliography.".into(),
        ),
        (
            format!("{big}: getting started - documentation"),
            format!("https://docs.example.com/{s}/getting-started"),
            "Install, configure and run your first project with {S}. This page covers requirements and a quick start.".into(),
            "Next steps link to the configuration reference, troubleshooting and the changelog.".into(),
        ),
    ];
    all.into_iter()
        .take(n.min(MAX_BRAVE_RESULTS))
        .map(|(title, url, desc, more)| Hit {
            title,
            url,
            description: desc.replace("{S}", &strong),
            content: format!("{} {}", desc.replace("{S}", t), more),
        })
        .collect()
}

fn header_token(values: &[Vec<u8>]) -> Option<String> {
    match values {
        [one] => {
            let s = std::str::from_utf8(one).ok()?.trim();
            (!s.is_empty()).then(|| s.to_owned())
        }
        _ => None,
    }
}

/// The key of an `Authorization: Bearer <key>` header (exactly one value).
pub fn bearer_key(values: &[Vec<u8>]) -> Option<String> {
    let v = header_token(values)?;
    let (scheme, key) = v.split_once(' ')?;
    let key = key.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !key.is_empty()).then(|| key.to_owned())
}

// ---- Brave ----

fn brave_error(status: u16, code: &str, detail: &str) -> Reply {
    Reply::json(
        status,
        &json!({
            "type": "ErrorResponse",
            "error": { "status": status, "code": code, "detail": detail },
        }),
    )
}

/// The whole Brave answer for a request with query string `query` and the values of its
/// `X-Subscription-Token` header.
pub fn brave(query: &str, token_values: &[Vec<u8>]) -> Reply {
    let Some(token) = header_token(token_values) else {
        return brave_error(401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.");
    };
    if token == BRAVE_REVOKED_KEY {
        return brave_error(403, "SUBSCRIPTION_TOKEN_REVOKED", "The subscription token has been revoked.");
    }
    let q = match query_param(query, "q") {
        Some(q) if !q.trim().is_empty() => q,
        _ => return brave_error(422, "VALIDATION", "Parameter q is required."),
    };
    if q.chars().count() > MAX_QUERY_CHARS {
        return brave_error(422, "VALIDATION", "Parameter q is too long (max 400 characters).");
    }
    let count = match query_param(query, "count") {
        None => MAX_BRAVE_RESULTS as u32,
        Some(c) => match c.parse::<u32>() {
            Ok(n) if (1..=MAX_BRAVE_COUNT).contains(&n) => n,
            _ => return brave_error(422, "VALIDATION", "Parameter count must be between 1 and 20."),
        },
    };
    let sw = switches(&q);
    let mut reply = match sw.failure {
        Some(Failure::Unauthorized) => {
            brave_error(401, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.")
        }
        Some(Failure::RateLimited) => brave_error(429, "RATE_LIMITED", "Request rate limit exceeded for plan.")
            .with_header("retry-after", RETRY_AFTER_S.to_string())
            .with_header("x-ratelimit-limit", "1, 2000".to_owned())
            .with_header("x-ratelimit-remaining", "0, 1342".to_owned())
            .with_header("x-ratelimit-reset", format!("{RETRY_AFTER_S}, 1419200")),
        Some(Failure::ServerError) => {
            brave_error(500, "INTERNAL_ERROR", "An unexpected error occurred. Please try again later.")
        }
        Some(Failure::Malformed) => {
            Reply::malformed("{\"type\":\"search\",\"web\":{\"type\":\"search\",\"results\":[{\"title\":\"Trunc")
        }
        Some(Failure::Empty) => brave_results(&q, &[]),
        None => brave_results(&q, &hits(&topic(&q), count as usize)),
    };
    if sw.slow {
        reply.delay_ms = SLOW_DELAY_MS;
    }
    reply
}

fn brave_results(q: &str, hits: &[Hit]) -> Reply {
    let results: Vec<Value> = hits
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = h.url.split("://").nth(1).and_then(|rest| rest.split('/').next()).unwrap_or("");
            json!({
                "type": "search_result",
                "title": h.title,
                "url": h.url,
                "description": h.description,
                "is_source_local": false,
                "is_source_both": false,
                "family_friendly": true,
                "language": "en",
                "age": format!("{} days ago", 1 + i * 3),
                "meta_url": { "scheme": "https", "netloc": host, "hostname": host },
            })
        })
        .collect();
    Reply::json(
        200,
        &json!({
            "type": "search",
            "query": { "original": q, "more_results_available": false },
            "web": { "type": "search", "family_friendly": true, "results": results },
        }),
    )
}

// ---- Linkup ----

fn linkup_error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({
            "statusCode": status,
            "error": { "code": code, "message": message, "details": [] },
        }),
    )
}

fn linkup_invalid(field: &str, message: &str) -> Reply {
    Reply::json(
        400,
        &json!({
            "statusCode": 400,
            "error": {
                "code": "VALIDATION_ERROR",
                "message": "Validation failed",
                "details": [{ "field": field, "message": message }],
            },
        }),
    )
}

/// The `q` of a valid Linkup search body, or the 400 answer.
pub fn linkup_query(body: &[u8]) -> Result<String, Reply> {
    let obj = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => o,
        _ => return Err(linkup_invalid("body", "body must be a JSON object")),
    };
    let q = match obj.get("q") {
        Some(Value::String(q)) if !q.trim().is_empty() => q.clone(),
        _ => return Err(linkup_invalid("q", "q must be a non-empty string")),
    };
    if q.chars().count() > MAX_QUERY_CHARS {
        return Err(linkup_invalid("q", "q must be at most 400 characters"));
    }
    match obj.get("depth") {
        Some(Value::String(d)) if d == "standard" || d == "deep" => {}
        _ => return Err(linkup_invalid("depth", "depth must be one of: standard, deep")),
    }
    match obj.get("outputType") {
        Some(Value::String(o)) if o == "searchResults" => {}
        _ => {
            return Err(linkup_invalid(
                "outputType",
                "outputType must be searchResults (the only output the simulator serves)",
            ))
        }
    }
    Ok(q)
}

/// The whole Linkup answer for a request with these `Authorization` values and body.
pub fn linkup(auth_values: &[Vec<u8>], body: &[u8]) -> Reply {
    let Some(key) = bearer_key(auth_values) else {
        return linkup_error(401, "UNAUTHORIZED", "Unauthorized action: missing or invalid API key.");
    };
    if key == LINKUP_REVOKED_KEY {
        return linkup_error(403, "FORBIDDEN", "This API key has been revoked.");
    }
    let q = match linkup_query(body) {
        Ok(q) => q,
        Err(reply) => return reply,
    };
    let sw = switches(&q);
    let mut reply = match sw.failure {
        Some(Failure::Unauthorized) => {
            linkup_error(401, "UNAUTHORIZED", "Unauthorized action: missing or invalid API key.")
        }
        Some(Failure::RateLimited) => linkup_error(429, "TOO_MANY_REQUESTS", "Too many requests, please slow down.")
            .with_header("retry-after", RETRY_AFTER_S.to_string()),
        Some(Failure::ServerError) => linkup_error(500, "INTERNAL_SERVER_ERROR", "Internal server error."),
        Some(Failure::Malformed) => Reply::malformed("{\"results\":[{\"type\":\"text\",\"name\":\"Trunc"),
        Some(Failure::Empty) => linkup_results(&[]),
        None => linkup_results(&hits(&topic(&q), LINKUP_RESULTS)),
    };
    if sw.slow {
        reply.delay_ms = SLOW_DELAY_MS;
    }
    reply
}

fn linkup_results(hits: &[Hit]) -> Reply {
    let results: Vec<Value> =
        hits.iter().map(|h| json!({ "type": "text", "name": h.title, "url": h.url, "content": h.content })).collect();
    Reply::json(200, &json!({ "results": results }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<Vec<u8>> {
        vec![s.as_bytes().to_vec()]
    }

    fn linkup_body(q: &str) -> Vec<u8> {
        json!({"q": q, "depth": "standard", "outputType": "searchResults"}).to_string().into_bytes()
    }

    #[test]
    fn switch_parsing() {
        assert_eq!(switches("rust async"), Switches::default());
        assert_eq!(switches("x sim:401").failure, Some(Failure::Unauthorized));
        assert_eq!(switches("SIM:429 x").failure, Some(Failure::RateLimited));
        assert_eq!(switches("a sim:500b").failure, Some(Failure::ServerError));
        assert_eq!(switches("sim:malformed").failure, Some(Failure::Malformed));
        assert_eq!(switches("sim:empty").failure, Some(Failure::Empty));
        assert_eq!(switches("sim:slow rust"), Switches { slow: true, failure: None });
        // The earliest failure wins; slow combines.
        assert_eq!(switches("sim:500 sim:401 sim:slow"), Switches { slow: true, failure: Some(Failure::ServerError) });
        assert_eq!(switches("sim:42").failure, None);
        assert_eq!(switches("sim 401").failure, None);
    }

    #[test]
    fn topic_drops_switch_words() {
        assert_eq!(topic("  rust   sim:slow async  "), "rust async");
        assert_eq!(topic("sim:401"), "search");
        assert_eq!(topic(""), "search");
        assert_eq!(slug("Rust & <b>Async</b>!"), "rust-b-async-b");
        assert_eq!(slug("日本"), "search");
        assert_eq!(wiki_title("rust async runtime"), "Rust_async_runtime");
    }

    #[test]
    fn hits_are_stable_bounded_and_one_carries_html() {
        let a = hits("tokio runtime", 10);
        assert_eq!(a, hits("tokio runtime", 10));
        assert_ne!(a, hits("tokio runtimes", 10));
        assert_eq!(a.len(), 10);
        assert_eq!(hits("x", 50).len(), MAX_BRAVE_RESULTS);
        assert_eq!(hits("x", 0).len(), 0);
        assert_eq!(hits("x", 3).len(), 3);
        for hit in &a {
            assert!(hit.url.starts_with("https://"), "{hit:?}");
            assert!(!hit.title.is_empty() && !hit.description.is_empty() && !hit.content.is_empty());
            assert!(!hit.content.contains("{S}") && !hit.description.contains("{S}"));
        }
        let urls: std::collections::HashSet<_> = a.iter().map(|h| &h.url).collect();
        assert_eq!(urls.len(), 10, "distinct URLs");
        assert!(a[0].description.contains("<strong>tokio runtime</strong>"));
        let html = &a[HTML_HIT];
        assert!(html.title.contains("<script>") && html.title.contains("&amp;"));
        assert!(html.description.contains("<img src=x onerror="));
        assert!(html.url.contains('&'));
        assert!(html.content.contains("javascript:"));
        // The other results are plain text apart from Brave's <strong>.
        for (i, hit) in a.iter().enumerate().filter(|(i, _)| *i != HTML_HIT) {
            assert!(!hit.title.contains('<'), "{i}: {hit:?}");
            assert!(!hit.content.contains('<'), "{i}: {hit:?}");
        }
    }

    #[test]
    fn brave_answers() {
        let ok = brave("q=tokio+runtime&count=5", &h("k"));
        assert_eq!(ok.status, 200);
        assert_eq!(ok.delay_ms, 0);
        assert_eq!(ok.header("content-type"), Some("application/json"));
        let body = ok.json_body().unwrap();
        let results = body["web"]["results"].as_array().unwrap();
        assert_eq!(results.len(), 5);
        for r in results {
            assert!(r["title"].is_string() && r["url"].is_string() && r["description"].is_string());
        }
        assert_eq!(body["query"]["original"], "tokio runtime");
        assert_eq!(brave("q=x", &h("k")).json_body().unwrap()["web"]["results"].as_array().unwrap().len(), 10);
        assert_eq!(brave("q=x&count=20", &h("k")).json_body().unwrap()["web"]["results"].as_array().unwrap().len(), 10);
        for bad in ["q=x&count=0", "q=x&count=21", "q=x&count=abc", "q=", "q=%20", "", "count=3", "q=%zz"] {
            let r = brave(bad, &h("k"));
            assert_eq!(r.status, 422, "{bad}");
            assert_eq!(r.json_body().unwrap()["error"]["code"], "VALIDATION");
        }
        let long = format!("q={}", "a".repeat(MAX_QUERY_CHARS + 1));
        assert_eq!(brave(&long, &h("k")).status, 422);
        assert_eq!(brave(&format!("q={}", "a".repeat(MAX_QUERY_CHARS)), &h("k")).status, 200);
    }

    #[test]
    fn brave_auth_and_switches() {
        assert_eq!(brave("q=x", &[]).status, 401);
        assert_eq!(brave("q=x", &h("  ")).status, 401);
        assert_eq!(brave("q=x", &[b"a".to_vec(), b"b".to_vec()]).status, 401);
        let revoked = brave("q=x", &h(BRAVE_REVOKED_KEY));
        assert_eq!(revoked.status, 403);
        assert_eq!(revoked.json_body().unwrap()["type"], "ErrorResponse");
        // Authentication comes before the query switches and validation.
        assert_eq!(brave("q=sim:500", &[]).status, 401);
        assert_eq!(brave("", &[]).status, 401);

        assert_eq!(brave("q=x+sim:401", &h("k")).status, 401);
        let limited = brave("q=sim:429", &h("k"));
        assert_eq!(limited.status, 429);
        assert_eq!(limited.header("Retry-After"), Some("7"));
        assert_eq!(brave("q=sim%3A500", &h("k")).status, 500);
        let bad = brave("q=sim:malformed", &h("k"));
        assert_eq!(bad.status, 200);
        assert!(bad.json_body().is_none());
        let empty = brave("q=sim:empty", &h("k")).json_body().unwrap();
        assert_eq!(empty["web"]["results"], json!([]));
        let slow = brave("q=rust+sim:slow", &h("k"));
        assert_eq!((slow.status, slow.delay_ms), (200, SLOW_DELAY_MS));
        let slow_fail = brave("q=sim:slow+sim:429", &h("k"));
        assert_eq!((slow_fail.status, slow_fail.delay_ms), (429, SLOW_DELAY_MS));
    }

    #[test]
    fn linkup_answers() {
        let ok = linkup(&h("Bearer k"), &linkup_body("tokio runtime"));
        assert_eq!(ok.status, 200);
        let body = ok.json_body().unwrap();
        let results = body["results"].as_array().unwrap();
        assert_eq!(results.len(), LINKUP_RESULTS);
        for r in results {
            assert!(r["name"].is_string() && r["url"].is_string() && r["content"].is_string());
        }
        assert!(results[HTML_HIT]["name"].as_str().unwrap().contains("<script>"));
        // Linkup content is plain text: no <strong> highlighting.
        assert!(!results[0]["content"].as_str().unwrap().contains("<strong>"));
        let deep = json!({"q": "x", "depth": "deep", "outputType": "searchResults", "includeImages": false});
        assert_eq!(linkup(&h("bearer k"), deep.to_string().as_bytes()).status, 200);
    }

    #[test]
    fn linkup_refuses_other_shapes() {
        for body in [
            json!({"q": "x", "depth": "standard"}),
            json!({"q": "x", "outputType": "searchResults"}),
            json!({"depth": "standard", "outputType": "searchResults"}),
            json!({"q": "", "depth": "standard", "outputType": "searchResults"}),
            json!({"q": 5, "depth": "standard", "outputType": "searchResults"}),
            json!({"q": "x", "depth": "shallow", "outputType": "searchResults"}),
            json!({"q": "x", "depth": "standard", "outputType": "sourcedAnswer"}),
            json!({"q": "a".repeat(MAX_QUERY_CHARS + 1), "depth": "standard", "outputType": "searchResults"}),
            json!(["q"]),
            json!("q"),
        ] {
            let r = linkup(&h("Bearer k"), body.to_string().as_bytes());
            assert_eq!(r.status, 400, "{body}");
            assert_eq!(r.json_body().unwrap()["error"]["code"], "VALIDATION_ERROR");
        }
        assert_eq!(linkup(&h("Bearer k"), b"not json").status, 400);
        assert_eq!(linkup(&h("Bearer k"), b"").status, 400);
    }

    #[test]
    fn linkup_auth_and_switches() {
        assert_eq!(linkup(&[], &linkup_body("x")).status, 401);
        assert_eq!(linkup(&h("Bearer "), &linkup_body("x")).status, 401);
        assert_eq!(linkup(&h("Basic k"), &linkup_body("x")).status, 401);
        assert_eq!(linkup(&h("k"), &linkup_body("x")).status, 401);
        assert_eq!(linkup(&h(&format!("Bearer {LINKUP_REVOKED_KEY}")), &linkup_body("x")).status, 403);
        // Auth before body validation.
        assert_eq!(linkup(&[], b"nope").status, 401);
        assert_eq!(linkup(&h("Bearer k"), &linkup_body("sim:401")).status, 401);
        let limited = linkup(&h("Bearer k"), &linkup_body("x sim:429"));
        assert_eq!((limited.status, limited.header("retry-after")), (429, Some("7")));
        assert_eq!(linkup(&h("Bearer k"), &linkup_body("sim:500")).status, 500);
        let bad = linkup(&h("Bearer k"), &linkup_body("sim:malformed"));
        assert_eq!(bad.status, 200);
        assert!(bad.json_body().is_none());
        assert_eq!(linkup(&h("Bearer k"), &linkup_body("sim:empty")).json_body().unwrap()["results"], json!([]));
        assert_eq!(linkup(&h("Bearer k"), &linkup_body("sim:slow")).delay_ms, SLOW_DELAY_MS);
    }

    #[test]
    fn bearer_key_parsing() {
        assert_eq!(bearer_key(&h("Bearer abc")).as_deref(), Some("abc"));
        assert_eq!(bearer_key(&h("bearer  abc ")).as_deref(), Some("abc"));
        assert_eq!(bearer_key(&h("Bearer")), None);
        assert_eq!(bearer_key(&h("Token abc")), None);
        assert_eq!(bearer_key(&[]), None);
    }
}
