//! Server-side alerts of a relayed turn (docs/alerts.md): when the upstream
//! turn stream is silent past `alert_stall_ms`, ends in `error`, or drops,
//! one JSON POST goes to `alert_webhook_url`, at most one per turn and kind.
//!
//! Everything here is plain Rust on the stream's own millisecond clock (the
//! `: t=` clock of relay.rs), so the rules test natively on a clock the test
//! moves. The handler only sends what [`Alerting::take`] hands it, without
//! waiting for the answer (the webhook never holds the stream up).

use std::time::Duration;

use guest_http::{ApiError, BaseUrl};
use serde_json::{json, Map, Value};

use crate::error;
use crate::redact::Redactor;

/// The `alert.format` of every body.
pub const FORMAT: &str = "ratatoskr-alert";
pub const VERSION: u64 = 1;
/// `alert_stall_ms` when unset or unparsable.
pub const STALL_MS_DEFAULT: u64 = 30_000;
/// The most of a user's text or an error message a body carries (characters).
const MAX_TEXT: usize = 500;

/// Why an alert fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertKind {
    /// No upstream event for `alert_stall_ms`.
    Stall,
    /// The turn ended with an `error` event (the upstream's, or the relay's
    /// for an oversized event).
    Error,
    /// The upstream stream ended or broke before a terminal event.
    Dropped,
}

impl AlertKind {
    pub fn name(self) -> &'static str {
        match self {
            AlertKind::Stall => "stall",
            AlertKind::Error => "error",
            AlertKind::Dropped => "dropped",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The alert variables, read per request like every other.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertSettings {
    pub https: bool,
    pub authority: String,
    /// The URL's path and query as configured ("/" for none).
    pub path_and_query: String,
    pub stall_ms: u64,
    pub include_text: bool,
    /// Connect and first-answer bound of one POST (`upstream_timeout_ms`).
    pub timeout: Duration,
}

impl AlertSettings {
    /// `None` when `alert_webhook_url` is empty (alerts are off); a URL that
    /// is not http(s) is the usual 500 `server_misconfigured`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, timeout: Duration) -> Result<Option<Self>, ApiError> {
        let url = var("alert_webhook_url").unwrap_or_default();
        let url = url.trim();
        if url.is_empty() {
            return Ok(None);
        }
        let base =
            BaseUrl::parse(url).ok_or_else(|| error::misconfigured("alert_webhook_url is not an http(s) URL"))?;
        let rest = url.split_once("://").map_or("", |(_, rest)| rest);
        let path_and_query = match rest.find(['/', '?']) {
            Some(at) if rest[at..].starts_with('/') => rest[at..].to_string(),
            Some(at) => format!("/{}", &rest[at..]),
            None => "/".to_string(),
        };
        let stall_ms = var("alert_stall_ms").and_then(|v| v.trim().parse().ok()).filter(|ms| *ms > 0);
        Ok(Some(AlertSettings {
            https: base.https,
            authority: base.authority,
            path_and_query,
            stall_ms: stall_ms.unwrap_or(STALL_MS_DEFAULT),
            include_text: var("alert_include_text").is_some_and(|v| v.trim() == "true"),
            timeout,
        }))
    }
}

/// One POST to make: the webhook and the alert's JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub kind: AlertKind,
    pub https: bool,
    pub authority: String,
    pub path_and_query: String,
    pub body: String,
    pub timeout: Duration,
}

/// What the alerts of one turn know about it.
#[derive(Debug, Clone, Default)]
pub struct TurnContext {
    pub session_id: String,
    pub agent_id: Option<String>,
    /// The user's text of this turn; it leaves only with `alert_include_text`.
    pub user_text: String,
}

/// One alert, as the rules found it.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    kind: AlertKind,
    /// When, on the stream's clock.
    at_ms: u64,
    /// The silence before it: since the last upstream event (or the stream's start).
    silent_ms: u64,
    error_code: Option<String>,
    error_message: Option<String>,
}

/// The rules for one turn stream, on its millisecond clock (0: the stream opened).
#[derive(Debug, Clone)]
pub struct AlertRules {
    stall_ms: u64,
    last_event_ms: u64,
    ended: bool,
    /// One alert per kind per turn.
    fired: [bool; 3],
    found: Vec<Found>,
}

impl AlertRules {
    pub fn new(stall_ms: u64) -> Self {
        AlertRules { stall_ms, last_event_ms: 0, ended: false, fired: [false; 3], found: Vec::new() }
    }

    /// An upstream event was read at `ms` (any event: each one shows the turn moves).
    pub fn event(&mut self, ms: u64) {
        self.check(ms);
        self.last_event_ms = self.last_event_ms.max(ms);
    }

    /// The turn ended with an `error` event at `ms`.
    pub fn error(&mut self, ms: u64, code: Option<&str>, message: Option<&str>) {
        if !self.ended {
            let code = code.filter(|c| is_code(c)).map(str::to_string);
            self.fire(AlertKind::Error, ms, code, message.map(str::to_string));
            self.ended = true;
        }
    }

    /// The turn ended otherwise (`done`, `cancelled`): no alert follows.
    pub fn ended(&mut self) {
        self.ended = true;
    }

    /// The upstream stream ended or broke at `ms` before a terminal event.
    pub fn dropped(&mut self, ms: u64) {
        if !self.ended {
            self.fire(AlertKind::Dropped, ms, None, None);
            self.ended = true;
        }
    }

    /// The clock reads `now`: a silence past the threshold is a stall.
    pub fn check(&mut self, now: u64) {
        if !self.ended && now.saturating_sub(self.last_event_ms) >= self.stall_ms {
            self.fire(AlertKind::Stall, now, None, None);
        }
    }

    /// When [`AlertRules::check`] could next find a stall, if it still can.
    pub fn next_check(&self) -> Option<u64> {
        (!self.ended && !self.fired[AlertKind::Stall.index()]).then(|| self.last_event_ms.saturating_add(self.stall_ms))
    }

    fn fire(&mut self, kind: AlertKind, at_ms: u64, error_code: Option<String>, error_message: Option<String>) {
        if std::mem::replace(&mut self.fired[kind.index()], true) {
            return;
        }
        let silent_ms = at_ms.saturating_sub(self.last_event_ms);
        self.found.push(Found { kind, at_ms, silent_ms, error_code, error_message });
    }

    fn take(&mut self) -> Vec<Found> {
        std::mem::take(&mut self.found)
    }
}

/// A code worth naming in an alert: an identifier, not free text (Slack
/// markup such as `<!channel>` cannot ride in on one).
fn is_code(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
}

/// One turn's alerting: its rules, what it knows of the turn, and where alerts go.
#[derive(Debug, Clone)]
pub struct Alerting {
    settings: AlertSettings,
    context: TurnContext,
    redactor: Redactor,
    pub rules: AlertRules,
    /// The wall clock (unix ms) when the stream opened.
    t0_unix_ms: u64,
    turn_id: Option<String>,
}

impl Alerting {
    pub fn new(settings: AlertSettings, context: TurnContext, redactor: Redactor) -> Self {
        let rules = AlertRules::new(settings.stall_ms);
        Alerting { settings, context, redactor, rules, t0_unix_ms: 0, turn_id: None }
    }

    /// The stream opened at this wall-clock time.
    pub fn opened(&mut self, unix_ms: u64) {
        self.t0_unix_ms = unix_ms;
    }

    /// The upstream's turn id (from `turn.started`), if it is an id.
    pub fn turn_id(&mut self, id: &str) {
        if crate::routes::turn_id(id).is_ok() {
            self.turn_id = Some(id.to_string());
        }
    }

    /// The POSTs due at `now` (ms on the stream's clock): a stall found now,
    /// and whatever the events found since the last call.
    pub fn take(&mut self, now: u64) -> Vec<Delivery> {
        self.rules.check(now);
        self.rules.take().into_iter().map(|found| self.delivery(&found)).collect()
    }

    fn delivery(&self, found: &Found) -> Delivery {
        let s = &self.settings;
        Delivery {
            kind: found.kind,
            https: s.https,
            authority: s.authority.clone(),
            path_and_query: s.path_and_query.clone(),
            body: self.body(found),
            timeout: s.timeout,
        }
    }

    /// The documented body (docs/alerts.md): Slack's `text`, and `alert`.
    fn body(&self, found: &Found) -> String {
        let c = &self.context;
        let agent = c.agent_id.as_deref().map_or(String::new(), |a| format!(", agent {a}"));
        let turn = self.turn_id.as_deref().unwrap_or("(no turn id yet)");
        let what = match found.kind {
            AlertKind::Stall => format!(
                "stalled: no upstream event for {} (threshold {})",
                seconds(found.silent_ms),
                seconds(self.settings.stall_ms)
            ),
            AlertKind::Error => match &found.error_code {
                Some(code) => format!("ended in error {code}"),
                None => "ended in error".to_string(),
            },
            AlertKind::Dropped => "dropped: the upstream stream ended before the turn finished".to_string(),
        };
        let text =
            format!("[ratatoskr] turn {turn} (session {}{agent}) {what} after {}", c.session_id, seconds(found.at_ms));
        let mut alert = Map::new();
        alert.insert("format".into(), FORMAT.into());
        alert.insert("version".into(), VERSION.into());
        alert.insert("kind".into(), found.kind.name().into());
        alert.insert("session_id".into(), c.session_id.clone().into());
        alert.insert("agent_id".into(), c.agent_id.clone().into());
        alert.insert("turn_id".into(), self.turn_id.clone().into());
        alert.insert("at_unix_ms".into(), self.t0_unix_ms.saturating_add(found.at_ms).into());
        alert.insert("stream_started_unix_ms".into(), self.t0_unix_ms.into());
        alert.insert(
            "durations".into(),
            json!({ "turn_ms": found.at_ms, "silent_ms": found.silent_ms, "stall_threshold_ms": self.settings.stall_ms }),
        );
        alert.insert("error_code".into(), found.error_code.clone().into());
        if self.settings.include_text {
            let cut = |t: &str| self.redactor.redact(&t.chars().take(MAX_TEXT).collect::<String>()).into_owned();
            alert.insert("user_text".into(), cut(&c.user_text).into());
            alert.insert("error_message".into(), found.error_message.as_deref().map(cut).into());
        }
        let body = json!({ "text": text, "alert": Value::Object(alert) }).to_string();
        // Every string was built from ids or redacted text; one more pass keeps
        // the rule in one place if a field is ever added (INV-ADMIN-KEY).
        self.redactor.redact_json(&body).map_or(body.clone(), |b| b.into_owned())
    }
}

/// `12.3 s`.
fn seconds(ms: u64) -> String {
    format!("{}.{} s", ms / 1000, (ms % 1000) / 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "adm_sekrit_0123";

    fn settings(include_text: bool) -> AlertSettings {
        AlertSettings {
            https: true,
            authority: "hooks.example".into(),
            path_and_query: "/services/T0/B0/x".into(),
            stall_ms: 1000,
            include_text,
            timeout: Duration::from_millis(300),
        }
    }

    fn alerting(include_text: bool) -> Alerting {
        let context = TurnContext {
            session_id: "s_1".into(),
            agent_id: Some("sindra".into()),
            user_text: format!("my secret question and the key {KEY}"),
        };
        let mut a = Alerting::new(settings(include_text), context, Redactor::new([KEY]));
        a.opened(1_764_000_000_000);
        a.turn_id("t_1");
        a
    }

    fn kinds(deliveries: &[Delivery]) -> Vec<&'static str> {
        deliveries.iter().map(|d| d.kind.name()).collect()
    }

    fn alert(d: &Delivery) -> Value {
        serde_json::from_str::<Value>(&d.body).unwrap()["alert"].clone()
    }

    #[test]
    fn a_silence_past_the_threshold_is_one_stall_alert_per_turn() {
        let mut a = alerting(false);
        a.rules.event(0);
        assert!(a.take(999).is_empty(), "just under the threshold");
        assert_eq!(a.rules.next_check(), Some(1000));
        a.rules.event(900);
        assert!(a.take(1899).is_empty(), "an event moved the silence's start");
        assert_eq!(a.rules.next_check(), Some(1900));
        let stall = a.take(1900);
        assert_eq!(kinds(&stall), ["stall"]);
        let v = alert(&stall[0]);
        assert_eq!(v["durations"], json!({ "turn_ms": 1900, "silent_ms": 1000, "stall_threshold_ms": 1000 }));
        assert_eq!(v["at_unix_ms"], 1_764_000_001_900_u64);
        // A second silence of the same turn is no second alert, and nothing is checked for again.
        a.rules.event(2500);
        assert_eq!(a.rules.next_check(), None);
        assert!(a.take(60_000).is_empty());
    }

    #[test]
    fn an_error_event_is_one_error_alert_and_nothing_follows_it() {
        let mut a = alerting(false);
        a.rules.event(10);
        a.rules.event(250);
        a.rules.error(250, Some("model_overloaded"), Some("the model said no"));
        assert_eq!(a.rules.next_check(), None, "an ended turn cannot stall");
        let sent = a.take(300);
        assert_eq!(kinds(&sent), ["error"]);
        let v = alert(&sent[0]);
        assert_eq!((v["kind"].as_str(), v["error_code"].as_str()), (Some("error"), Some("model_overloaded")));
        a.rules.dropped(400);
        a.rules.error(500, Some("again"), None);
        assert!(a.take(99_999).is_empty(), "no drop after an end, no second error");
        // A code that is not an identifier is left out, never passed on as text.
        let mut b = alerting(false);
        b.rules.error(5, Some("<!channel> hi"), None);
        assert_eq!(alert(&b.take(5)[0])["error_code"], Value::Null);
    }

    #[test]
    fn a_dropped_stream_is_one_dropped_alert_and_a_stall_before_it_stays_its_own() {
        let mut a = alerting(false);
        a.rules.event(0);
        assert_eq!(kinds(&a.take(1500)), ["stall"]);
        a.rules.dropped(2000);
        a.rules.dropped(2100);
        let sent = a.take(2100);
        assert_eq!(kinds(&sent), ["dropped"]);
        assert_eq!(alert(&sent[0])["durations"]["silent_ms"], 2000);
        // done / cancelled end the turn quietly.
        let mut b = alerting(false);
        b.rules.ended();
        b.rules.dropped(10);
        assert!(b.take(99_999).is_empty());
    }

    #[test]
    fn several_alerts_found_between_two_takes_leave_in_order() {
        let mut a = alerting(false);
        a.rules.event(0);
        a.rules.event(5000); // the event itself shows the silence before it was a stall
        a.rules.error(5000, None, None);
        assert_eq!(kinds(&a.take(5000)), ["stall", "error"]);
    }

    #[test]
    fn the_body_is_slack_text_and_the_documented_object_without_user_text_or_keys() {
        let mut a = alerting(false);
        a.rules.error(1234, Some("boom"), Some(&format!("message with {KEY}")));
        let d = &a.take(1234)[0];
        assert_eq!(
            (d.https, d.authority.as_str(), d.path_and_query.as_str()),
            (true, "hooks.example", "/services/T0/B0/x")
        );
        let v: Value = serde_json::from_str(&d.body).unwrap();
        assert_eq!(v["text"], "[ratatoskr] turn t_1 (session s_1, agent sindra) ended in error boom after 1.2 s");
        let keys: Vec<&str> = v["alert"].as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected = [
            "format",
            "version",
            "kind",
            "session_id",
            "agent_id",
            "turn_id",
            "at_unix_ms",
            "stream_started_unix_ms",
            "durations",
            "error_code",
        ];
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!((v["alert"]["format"].as_str(), v["alert"]["version"].as_u64()), (Some(FORMAT), Some(1)));
        assert!(!d.body.contains("secret question") && !d.body.contains("message with") && !d.body.contains(KEY));
        // With alert_include_text: the text and the message, cut and redacted.
        let mut a = alerting(true);
        a.rules.error(1, Some("boom"), Some(&format!("message with {KEY}{}", "x".repeat(900))));
        let v = alert(&a.take(1)[0]);
        assert_eq!(v["user_text"], "my secret question and the key [redacted]");
        let message = v["error_message"].as_str().unwrap();
        assert!(message.starts_with("message with [redacted]xx") && message.chars().count() < MAX_TEXT + 10);
        assert!(!v.to_string().contains(KEY));
    }

    #[test]
    fn every_body_has_exactly_the_fields_docs_alert_webhook_schema_names() {
        let schema: Value = serde_json::from_str(include_str!("../../../docs/alert-webhook.schema.json")).unwrap();
        let alert_schema = &schema["properties"]["alert"];
        let names = |v: &Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        let required = |v: &Value| -> Vec<String> {
            let mut k: Vec<String> =
                v["required"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().into()).collect();
            k.sort();
            k
        };
        for include_text in [false, true] {
            let mut a = alerting(include_text);
            a.rules.error(3, Some("e"), Some("m"));
            let v: Value = serde_json::from_str(&a.take(3)[0].body).unwrap();
            assert_eq!(names(&v), required(&schema));
            let optional = if include_text { vec!["error_message".to_string(), "user_text".into()] } else { vec![] };
            let mut expected = [required(alert_schema), optional].concat();
            expected.sort();
            assert_eq!(names(&v["alert"]), expected);
            assert_eq!(names(&v["alert"]["durations"]), required(&alert_schema["properties"]["durations"]));
            let kinds = alert_schema["properties"]["kind"]["enum"].as_array().unwrap();
            assert!(kinds.contains(&v["alert"]["kind"]));
            for k in names(&v["alert"]) {
                assert!(alert_schema["properties"].get(&k).is_some(), "{k} is not in the schema");
            }
        }
    }

    #[test]
    fn a_turn_id_that_is_not_an_id_is_not_named() {
        let mut a = Alerting::new(settings(false), TurnContext::default(), Redactor::default());
        a.turn_id("t_1 <!here>");
        a.rules.dropped(0);
        let d = &a.take(0)[0];
        let v: Value = serde_json::from_str(&d.body).unwrap();
        assert_eq!(v["alert"]["turn_id"], Value::Null);
        assert!(!d.body.contains("<!here>"));
    }

    #[test]
    fn settings_come_from_the_variables_and_an_empty_url_is_off() {
        let t = Duration::from_millis(300);
        let vars = |url: &'static str, stall: &'static str, text: &'static str| {
            move |name: &str| match name {
                "alert_webhook_url" => Some(url.to_string()),
                "alert_stall_ms" => Some(stall.to_string()),
                "alert_include_text" => Some(text.to_string()),
                _ => None,
            }
        };
        assert_eq!(AlertSettings::from_vars(vars("", "5", "true"), t).unwrap(), None);
        assert_eq!(AlertSettings::from_vars(vars("  ", "5", "true"), t).unwrap(), None);
        assert_eq!(AlertSettings::from_vars(|_| None, t).unwrap(), None);
        let s =
            AlertSettings::from_vars(vars("https://hooks.example:8443/a/b/?x=1", "2500", "true"), t).unwrap().unwrap();
        assert_eq!(
            (s.https, s.authority.as_str(), s.path_and_query.as_str(), s.stall_ms, s.include_text),
            (true, "hooks.example:8443", "/a/b/?x=1", 2500, true)
        );
        let s = AlertSettings::from_vars(vars("http://hook.test", "soon", "yes"), t).unwrap().unwrap();
        assert_eq!((s.path_and_query.as_str(), s.stall_ms, s.include_text), ("/", STALL_MS_DEFAULT, false));
        let s = AlertSettings::from_vars(vars("http://hook.test?k=v", "0", ""), t).unwrap().unwrap();
        assert_eq!((s.path_and_query.as_str(), s.stall_ms), ("/?k=v", STALL_MS_DEFAULT));
        let e = AlertSettings::from_vars(vars("ftp://x", "1", ""), t).unwrap_err();
        assert_eq!((e.status, e.code), (500, "server_misconfigured"));
    }
}
