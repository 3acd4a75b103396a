//! The configuration of the portable console, which runs where there are no
//! Spin variables: each variable comes from the environment as
//! `RATATOSKR_<NAME>` (the application variable's name in spin.toml, upper
//! case), else spin.toml's default, so both packagings read the same names
//! and defaults and validate them in the same [`crate::plan`]. There is no
//! host allow-list either: [`may_call`] keeps calls to the origins of the three
//! configured URLs, which is what spin.toml's `upstream_origin`,
//! `affect_origin` and `alert_webhook_origin` name.

use guest_http::kv::{Kv, KvError};
use guest_http::BaseUrl;

use crate::Platform;

/// The prefix of every environment variable the portable console reads.
pub const PREFIX: &str = "RATATOSKR_";

/// Every variable the console's routes read: its name in spin.toml's
/// `[component.debug-api.variables]`, the application variable it is bound
/// to, and that variable's default (a test holds this to spin.toml).
pub const VARIABLES: [(&str, &str, &str); 14] = [
    ("allowed_hosts", "allowed_hosts", ""),
    ("console_access", "console_access", "open"),
    ("console_role", "console_role", "viewer"),
    ("upstream_url", "upstream_url", "http://simulator.spin.internal"),
    ("affect_read_url", "affect_read_url", "http://simulator.spin.internal/worldtree/affect"),
    ("consumer_key", "bifrost_consumer_key", "sim-consumer-key"),
    ("admin_key", "admin_key", ""),
    ("end_user_id", "end_user_id", "operator"),
    ("bifrost_visible_host", "bifrost_visible_host", "bifrost.local"),
    ("upstream_timeout_ms", "upstream_timeout_ms", "10000"),
    ("sse_keepalive_ms", "sse_keepalive_ms", "15000"),
    ("alert_webhook_url", "alert_webhook_url", ""),
    ("alert_stall_ms", "alert_stall_ms", "30000"),
    ("alert_include_text", "alert_include_text", "false"),
];

/// The debug-api's variables that mean nothing without Spin's peer address
/// (`spin-client-addr`): the portable console has no such variable.
pub const SPIN_ONLY: [&str; 1] = ["trusted_proxies"];

/// `RATATOSKR_UPSTREAM_URL` for `upstream_url`.
pub fn env_name(app_variable: &str) -> String {
    format!("{PREFIX}{}", app_variable.to_ascii_uppercase())
}

/// The variable `name` (the debug-api's name) from `env`, else its default;
/// `None` for a name the console does not have.
pub fn var(name: &str, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    let (_, app, default) = VARIABLES.iter().find(|(n, _, _)| *n == name)?;
    Some(env(&env_name(app)).unwrap_or_else(|| default.to_string()))
}

/// Whether a call to `authority` (over https or not) goes to the origin of
/// `upstream_url`, of `affect_read_url` or of `alert_webhook_url`.
pub fn may_call(var: impl Fn(&str) -> Option<String>, https: bool, authority: &str) -> bool {
    ["upstream_url", "affect_read_url", "alert_webhook_url"]
        .into_iter()
        .filter_map(|name| BaseUrl::parse(&var(name)?))
        .any(|url| url.https == https && url.authority.eq_ignore_ascii_case(authority))
}

/// The portable console's platform: the process environment
/// (`wasi:cli/environment`), the allow-list above, and no key-value store
/// (the affect history then answers its typed 503).
pub struct Environment;

impl Platform for Environment {
    type Store = NoStore;

    fn var(&self, name: &str) -> Option<String> {
        var(name, |key| std::env::var(key).ok())
    }

    fn store(&self) -> Result<NoStore, KvError> {
        Err(KvError("this runtime has no key-value store".to_string()))
    }

    /// wasi:http gives no peer address, so no proxy can be told from its
    /// clients: forwarded headers change nothing here.
    fn trusted_proxies(&self) -> Vec<guest_http::forwarded::Cidr> {
        Vec::new()
    }

    fn may_call(&self, https: bool, authority: &str) -> bool {
        may_call(|name| self.var(name), https, authority)
    }
}

/// A store that cannot exist: the type of [`Environment`]'s missing one.
pub enum NoStore {}

impl Kv for NoStore {
    fn get(&self, _: &str) -> Result<Option<Vec<u8>>, KvError> {
        match *self {}
    }
    fn set(&self, _: &str, _: &[u8]) -> Result<(), KvError> {
        match *self {}
    }
    fn delete(&self, _: &str) -> Result<(), KvError> {
        match *self {}
    }
    fn exists(&self, _: &str) -> Result<bool, KvError> {
        match *self {}
    }
    fn keys(&self) -> Result<Vec<String>, KvError> {
        match *self {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn spin_toml() -> toml::Table {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../spin.toml");
        std::fs::read_to_string(path).unwrap().parse().unwrap()
    }

    #[test]
    fn the_table_is_spin_tomls_binding_and_defaults() {
        let manifest = spin_toml();
        let bound = manifest["component"]["debug-api"]["variables"].as_table().unwrap();
        let names: Vec<&str> = VARIABLES.iter().map(|(n, _, _)| *n).collect();
        let mut expected: Vec<&str> =
            bound.keys().map(String::as_str).filter(|name| !SPIN_ONLY.contains(name)).collect();
        expected.sort_unstable();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, expected, "every variable of the debug-api, and no other");
        for (name, app, default) in VARIABLES {
            assert_eq!(bound[name].as_str(), Some(format!("{{{{ {app} }}}}").as_str()), "{name}");
            let declared = &manifest["variables"][app];
            assert_eq!(declared["default"].as_str(), Some(default), "{app}");
        }
    }

    #[test]
    fn the_environment_wins_over_the_default_and_an_empty_value_counts() {
        let env = HashMap::from([
            ("RATATOSKR_BIFROST_CONSUMER_KEY".to_string(), "k".to_string()),
            ("RATATOSKR_ADMIN_KEY".to_string(), String::new()),
            ("consumer_key".to_string(), "not this".to_string()),
        ]);
        let get = |name: &str| var(name, |key| env.get(key).cloned());
        assert_eq!(get("consumer_key").as_deref(), Some("k"));
        assert_eq!(get("admin_key").as_deref(), Some(""));
        assert_eq!(get("end_user_id").as_deref(), Some("operator"));
        assert_eq!(get("upstream_origin"), None, "the origins are the URLs' own");
        assert_eq!(env_name("bifrost_consumer_key"), "RATATOSKR_BIFROST_CONSUMER_KEY");
    }

    #[test]
    fn only_the_configured_urls_origins_may_be_called() {
        let vars = HashMap::from([
            ("upstream_url", "https://gw.example:8443/ratatoskr"),
            ("affect_read_url", "http://Worldtree.lan/affect"),
        ]);
        let allowed = |https, authority| may_call(|n| vars.get(n).map(|v| v.to_string()), https, authority);
        assert!(allowed(true, "gw.example:8443"));
        assert!(allowed(false, "worldtree.lan"));
        assert!(!allowed(false, "gw.example:8443"), "the scheme counts");
        assert!(!allowed(true, "gw.example"), "the port counts");
        assert!(!allowed(false, "playground.spin.internal"));
        assert!(!allowed(false, "worldtree.lan.attacker.example"));
        assert!(!allowed(true, "hooks.example"), "no webhook configured");
        let hooked = HashMap::from([("alert_webhook_url", "https://hooks.example/services/x")]);
        assert!(may_call(|n| hooked.get(n).map(|v| v.to_string()), true, "hooks.example"), "the webhook's origin");
        let broken = HashMap::from([("upstream_url", "ftp://x")]);
        assert!(!may_call(|n| broken.get(n).map(|v| v.to_string()), false, "x"));
    }
}
