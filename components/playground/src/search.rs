//! `GET /playground/search?q=&gateway_id=`: the Playground's web-search probe.
//!
//! Order (each step before anything later can happen):
//! 1. authenticated session (in `api`), `q` and `gateway_id` valid (400);
//! 2. gateway access (404 `gateway_not_found`, also for another tenant's);
//! 3. role: viewers 403 `insufficient_role`;
//! 4. the tenant's `playground_enabled` off → 403 `feature_disabled`;
//! 5. the fail-closed EU gate: the gateway OR its tenant enforces
//!    `eu_region_routing` and the provider (brave when unset) is not
//!    EU-based → 403 `eu_gate_refused` with a `reason` — nothing egresses;
//! 6. the gateway's STORED `web_search_api_key` only (never the platform
//!    Linkup key of the inference path, which this component cannot even
//!    read) → 503 `search_key_missing` when there is none;
//! 7. dispatch with connect / first-byte / between-bytes timeouts, and the
//!    provider's answer classified into typed errors ([`classify_status`],
//!    [`classify_transport`], `provider_malformed`).

use serde_json::{json, Value};

use crate::access::may_use_playground;
use crate::auth::Principal;
use crate::context::{Config, Ctx};
use crate::db::Val;
use crate::egress::{Method, OutboundRequest, TransportFailure};
use crate::error::{self, ApiError};
use crate::gateways::{self, Gateway};
use crate::http::{Request, Response};
use crate::plain_text::plain_text;
use crate::routes;
use crate::util::BaseUrl;
use query::percent_encode;

/// At most this many results are returned.
pub const MAX_RESULTS: usize = 5;
/// A provider answer larger than this is refused (`provider_malformed`).
pub const MAX_PROVIDER_BODY: usize = 1 << 20;
/// Retry-After when a provider's 429 gives none we can read.
pub const DEFAULT_RETRY_AFTER_S: u64 = 30;
pub const MAX_RETRY_AFTER_S: u64 = 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// US-based; the default when a gateway names none.
    Brave,
    /// EU-based.
    Linkup,
}

impl Provider {
    pub fn parse(raw: &str) -> Option<Provider> {
        match raw {
            "brave" => Some(Provider::Brave),
            "linkup" => Some(Provider::Linkup),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Brave => "brave",
            Provider::Linkup => "linkup",
        }
    }

    pub fn is_eu(self) -> bool {
        matches!(self, Provider::Linkup)
    }
}

/// A gateway's search configuration after the tenant EU-residency floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    pub provider: Provider,
    pub eu_region_routing: bool,
}

/// The EU gate. `stored` is `web_search_provider` as stored (`None` = brave).
pub fn eu_gate(stored: Option<&str>, gateway_eu: bool, tenant_eu: bool) -> Result<Resolved, ApiError> {
    let eu = gateway_eu || tenant_eu;
    let provider = match stored {
        None => Some(Provider::Brave),
        Some(raw) => Provider::parse(raw),
    };
    let enforced_by = match (gateway_eu, tenant_eu) {
        (true, true) => "the gateway and its tenant enforce",
        (true, false) => "the gateway enforces",
        _ => "the gateway's tenant enforces",
    };
    match provider {
        Some(p) if eu && !p.is_eu() => {
            let default = if stored.is_none() { " (the default)" } else { "" };
            let reason = format!(
                "{enforced_by} eu_region_routing, and the web-search provider {}{default} is not EU-based",
                p.as_str()
            );
            Err(error::eu_gate_refused(reason, Some(p.as_str()), gateway_eu, tenant_eu))
        }
        Some(p) => Ok(Resolved { provider: p, eu_region_routing: eu }),
        // Unknown provider (the schema's CHECK forbids it): fail closed either way.
        None if eu => {
            let reason = format!(
                "{enforced_by} eu_region_routing, and the configured web-search provider is not a known EU-based provider"
            );
            Err(error::eu_gate_refused(reason, None, gateway_eu, tenant_eu))
        }
        None => Err(error::search_provider_unsupported()),
    }
}

impl Config {
    pub fn base_url(&self, provider: Provider) -> &BaseUrl {
        match provider {
            Provider::Brave => &self.brave_base_url,
            Provider::Linkup => &self.linkup_base_url,
        }
    }
}

// ---- outbound HTTP ---------------------------------------------------------------

pub fn build_request(provider: Provider, base: &BaseUrl, key: &str, q: &str, timeout_ms: u64) -> OutboundRequest {
    let mut headers = vec![("accept".to_string(), "application/json".to_string())];
    let (method, path_and_query, body) = match provider {
        Provider::Brave => {
            headers.push(("x-subscription-token".into(), key.to_string()));
            (Method::Get, base.path(&format!("/res/v1/web/search?q={}&count={MAX_RESULTS}", percent_encode(q))), None)
        }
        Provider::Linkup => {
            headers.push(("authorization".into(), format!("Bearer {key}")));
            headers.push(("content-type".into(), "application/json".into()));
            let body = json!({ "q": q, "depth": "standard", "outputType": "searchResults" }).to_string();
            (Method::Post, base.path("/v1/search"), Some(body))
        }
    };
    OutboundRequest {
        method,
        https: base.https,
        authority: base.authority.clone(),
        path_and_query,
        headers,
        body,
        timeout_ms,
    }
}

// ---- classification ------------------------------------------------------------------

/// A provider's non-2xx status, as the inference path classifies it.
pub fn classify_status(provider: Provider, status: u16, retry_after: Option<&str>) -> ApiError {
    let provider = provider.as_str();
    match status {
        401 | 403 => error::provider_auth_failed(provider, status),
        429 => {
            let seconds = retry_after
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(DEFAULT_RETRY_AFTER_S, |s| s.min(MAX_RETRY_AFTER_S));
            error::provider_rate_limited(provider, status, seconds)
        }
        500..=599 => error::provider_unavailable(provider, status),
        _ => error::provider_error(provider, status),
    }
}

pub fn classify_transport(provider: Provider, failure: TransportFailure) -> ApiError {
    let provider = provider.as_str();
    match failure {
        TransportFailure::Timeout => error::provider_timeout(provider),
        TransportFailure::Unreachable => error::provider_unreachable(provider),
        TransportFailure::NotAllowed => error::provider_not_allowed(provider),
        TransportFailure::TooLarge => error::provider_malformed(provider),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// Maps a provider's 2xx body to at most five results; `None` if it is not
/// the documented shape. Brave: `web.results[] {title, url, description}`
/// (no `web` = no results). Linkup: `results[] {name, url, content}`.
/// Items without a string `url` are skipped.
pub fn parse_results(provider: Provider, body: &[u8]) -> Option<Vec<SearchResult>> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let object = value.as_object()?;
    let (items, title, snippet) = match provider {
        Provider::Brave => match object.get("web") {
            None | Some(Value::Null) => return Some(Vec::new()),
            Some(Value::Object(web)) => match web.get("results") {
                None | Some(Value::Null) => return Some(Vec::new()),
                Some(Value::Array(items)) => (items, "title", "description"),
                _ => return None,
            },
            _ => return None,
        },
        Provider::Linkup => match object.get("results") {
            Some(Value::Array(items)) => (items, "name", "content"),
            _ => return None,
        },
    };
    let text = |item: &Value, key: &str| item.get(key).and_then(Value::as_str).unwrap_or("").to_string();
    // Titles and snippets carry provider markup and entities; the API's results are text.
    let plain = |item: &Value, key: &str| plain_text(item.get(key).and_then(Value::as_str).unwrap_or(""));
    Some(
        items
            .iter()
            .filter(|item| item.get("url").and_then(Value::as_str).is_some_and(|u| !u.is_empty()))
            .take(MAX_RESULTS)
            .map(|item| SearchResult {
                title: plain(item, title),
                url: text(item, "url"),
                snippet: plain(item, snippet),
            })
            .collect(),
    )
}

// ---- the route -------------------------------------------------------------------------

fn stored_key(ctx: &Ctx, gateway: &Gateway) -> Result<Option<String>, ApiError> {
    let row = ctx.db.one("SELECT web_search_api_key FROM gateways WHERE id = ?", &[Val::Text(gateway.id.clone())])?;
    Ok(row.and_then(|r| r.opt_text(0).ok().flatten()).filter(|k| !k.trim().is_empty()))
}

pub fn search(ctx: &Ctx, req: &Request, p: &Principal) -> Result<Response, ApiError> {
    let gateway_id = routes::gateway_param(&req.query)?;
    let q = routes::search_query(&req.query)?;
    let (gateway, access) = gateways::accessible(ctx, p, &gateway_id)?;
    may_use_playground(access)?;
    if !gateway.playground_enabled {
        return Err(error::feature_disabled());
    }
    let resolved = eu_gate(gateway.provider.as_deref(), gateway.gateway_eu, gateway.tenant_eu)?;
    let Some(key) = stored_key(ctx, &gateway)? else {
        return Err(error::search_key_missing(resolved.provider.as_str()));
    };
    let provider = resolved.provider;
    let request = build_request(provider, ctx.config.base_url(provider), &key, &q, ctx.config.provider_timeout_ms);
    let answer = ctx.egress.send(&request).map_err(|f| classify_transport(provider, f))?;
    if !(200..300).contains(&answer.status) {
        return Err(classify_status(provider, answer.status, answer.retry_after.as_deref()));
    }
    let results = parse_results(provider, &answer.body).ok_or_else(|| error::provider_malformed(provider.as_str()))?;
    let results: Vec<Value> =
        results.into_iter().map(|r| json!({ "title": r.title, "url": r.url, "snippet": r.snippet })).collect();
    Ok(Response::json(
        200,
        &json!({
            "results": results,
            "query": q,
            "provider": provider.as_str(),
            "eu_region_routing": resolved.eu_region_routing,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eu_gate_for_every_provider_and_flag_combination() {
        for stored in [None, Some("brave"), Some("linkup"), Some("google")] {
            for gateway_eu in [false, true] {
                for tenant_eu in [false, true] {
                    let eu = gateway_eu || tenant_eu;
                    let result = eu_gate(stored, gateway_eu, tenant_eu);
                    let label = format!("{stored:?} gateway_eu={gateway_eu} tenant_eu={tenant_eu}");
                    match (stored, eu) {
                        (Some("linkup"), _) => {
                            assert_eq!(
                                result.unwrap(),
                                Resolved { provider: Provider::Linkup, eu_region_routing: eu },
                                "{label}"
                            )
                        }
                        (None | Some("brave"), false) => {
                            assert_eq!(
                                result.unwrap(),
                                Resolved { provider: Provider::Brave, eu_region_routing: false },
                                "{label}"
                            )
                        }
                        (_, true) => {
                            let e = result.unwrap_err();
                            assert_eq!((e.status, e.code), (403, "eu_gate_refused"), "{label}");
                            let reason = e.fields["reason"].as_str().unwrap();
                            assert!(
                                reason.contains("eu_region_routing") && reason.contains("not"),
                                "{label}: {reason}"
                            );
                            if stored.is_none() {
                                assert!(reason.contains("brave (the default)"), "{reason}");
                            }
                            let source = &e.fields["eu_region_routing"];
                            assert_eq!(
                                (source["gateway"].as_bool(), source["tenant"].as_bool()),
                                (Some(gateway_eu), Some(tenant_eu))
                            );
                        }
                        (Some(_), false) => {
                            assert_eq!(result.unwrap_err().code, "search_provider_unsupported", "{label}")
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn brave_and_linkup_requests_follow_the_contract() {
        let base = BaseUrl::parse("http://brave.test/prefix").unwrap();
        let r = build_request(Provider::Brave, &base, "k-123", "rust & wasm?", 500);
        assert_eq!((r.method, r.authority.as_str(), r.https), (Method::Get, "brave.test", false));
        assert_eq!(r.path_and_query, "/prefix/res/v1/web/search?q=rust%20%26%20wasm%3F&count=5");
        assert!(r.headers.contains(&("x-subscription-token".into(), "k-123".into())));
        assert!(r.body.is_none());
        assert_eq!(r.timeout_ms, 500);

        let base = BaseUrl::parse("https://linkup.test").unwrap();
        let r = build_request(Provider::Linkup, &base, "k-456", "x' OR 1=1;--", 500);
        assert_eq!((r.method, r.path_and_query.as_str(), r.https), (Method::Post, "/v1/search", true));
        assert!(r.headers.contains(&("authorization".into(), "Bearer k-456".into())));
        let body: Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
        assert_eq!(body, json!({ "q": "x' OR 1=1;--", "depth": "standard", "outputType": "searchResults" }));
    }

    #[test]
    fn provider_errors_are_classified() {
        let cases: [(u16, Option<&str>, u16, &str); 9] = [
            (401, None, 502, "provider_auth_failed"),
            (403, None, 502, "provider_auth_failed"),
            (429, Some("7"), 429, "provider_rate_limited"),
            (429, None, 429, "provider_rate_limited"),
            (500, None, 502, "provider_unavailable"),
            (503, None, 502, "provider_unavailable"),
            (400, None, 502, "provider_error"),
            (404, None, 502, "provider_error"),
            (302, None, 502, "provider_error"),
        ];
        for (status, retry, http, code) in cases {
            let e = classify_status(Provider::Brave, status, retry);
            assert_eq!((e.status, e.code), (http, code), "{status}");
            assert_eq!(e.fields["status"], status);
            assert_eq!(e.fields["provider"], "brave");
        }
        let limited = classify_status(Provider::Linkup, 429, Some("7"));
        assert_eq!(limited.fields["retry_after"], 7);
        assert_eq!(limited.headers, vec![("retry-after".into(), "7".into())]);
        assert_eq!(
            classify_status(Provider::Linkup, 429, Some("Wed, 21 Oct 2015 07:28:00 GMT")).fields["retry_after"],
            30
        );
        assert_eq!(classify_status(Provider::Linkup, 429, Some("999999")).fields["retry_after"], 3600);
        let t = |f| {
            let e = classify_transport(Provider::Linkup, f);
            (e.status, e.code)
        };
        assert_eq!(t(TransportFailure::Timeout), (504, "provider_timeout"));
        assert_eq!(t(TransportFailure::Unreachable), (502, "provider_unreachable"));
        assert_eq!(t(TransportFailure::NotAllowed), (502, "provider_not_allowed"));
        assert_eq!(t(TransportFailure::TooLarge), (502, "provider_malformed"));
    }

    #[test]
    fn provider_markup_and_entities_become_plain_text_in_results() {
        // As Brave's API sends them: highlight tags and entities in title and description.
        let brave = json!({ "web": { "results": [{
            "title": "<strong>Fjord</strong> weather &amp; tides",
            "url": "https://e.test/a?x=1&amp;y=2",
            "description": "Q&amp;A &#8212; <strong>fjord</strong> <script>alert(1)</script>&lt;b&gt;"
        }] } });
        let r = parse_results(Provider::Brave, brave.to_string().as_bytes()).unwrap();
        assert_eq!(r[0].title, "Fjord weather & tides");
        assert_eq!(r[0].snippet, "Q&A — fjord <b>");
        // The URL is an address, not markup: passed as sent.
        assert_eq!(r[0].url, "https://e.test/a?x=1&amp;y=2");
        let linkup = json!({ "results": [{ "name": "caf&eacute; <em>guide</em>", "url": "https://l.test", "content": "a&nbsp;b" }] });
        let r = parse_results(Provider::Linkup, linkup.to_string().as_bytes()).unwrap();
        assert_eq!((r[0].title.as_str(), r[0].snippet.as_str()), ("café guide", "a b"));
    }

    #[test]
    fn results_map_to_title_url_snippet_at_most_five() {
        let brave = json!({ "web": { "results": (0..8).map(|i| json!({
            "title": format!("t{i}"), "url": format!("https://e.test/{i}"), "description": format!("d{i}")
        })).collect::<Vec<_>>() } });
        let r = parse_results(Provider::Brave, brave.to_string().as_bytes()).unwrap();
        assert_eq!(r.len(), 5);
        assert_eq!(r[0], SearchResult { title: "t0".into(), url: "https://e.test/0".into(), snippet: "d0".into() });
        let linkup = json!({ "results": [
            { "name": "n", "url": "https://l.test", "content": "c" },
            { "name": "no url" },
            { "type": "text", "name": "m", "url": "https://l.test/2" }
        ] });
        let r = parse_results(Provider::Linkup, linkup.to_string().as_bytes()).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1], SearchResult { title: "m".into(), url: "https://l.test/2".into(), snippet: String::new() });
        assert_eq!(parse_results(Provider::Brave, b"{\"query\":{}}").unwrap(), vec![], "no web section = no results");
        for bad in [&b"not json"[..], b"[]", b"{\"web\":[]}", b"{\"web\":{\"results\":{}}}"] {
            assert!(parse_results(Provider::Brave, bad).is_none(), "{}", String::from_utf8_lossy(bad));
        }
        for bad in [&b"{}"[..], b"{\"results\":null}", b"<html>", b""] {
            assert!(parse_results(Provider::Linkup, bad).is_none());
        }
    }
}
