//! `runtime-config.toml`: where stateful resources live, as in Spin.
//!
//! Supported: `[key_value_store.<label>] type = "spin", path = "…"` and
//! `[sqlite_database.<label>] type = "spin", path = "…"` (paths relative to the
//! runtime-config file; no path = in memory), and `[outbound_http]
//! connection_pooling = <bool>` (pooling is on without the table; as in Spin,
//! a table that leaves the key out turns it off). Without a file, the `default`
//! key-value store is `<app dir>/.spin/sqlite_key_value.db` and the `default`
//! database `<app dir>/.spin/sqlite_db.db`, Spin's own defaults.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRuntimeConfig {
    #[serde(default)]
    key_value_store: BTreeMap<String, RawStore>,
    #[serde(default)]
    sqlite_database: BTreeMap<String, RawStore>,
    #[serde(default)]
    outbound_http: Option<RawOutboundHttp>,
}

/// Spin's `max_connections` is not imitated: the table refuses it rather than ignore it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutboundHttp {
    #[serde(default)]
    connection_pooling: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    path: Option<PathBuf>,
}

/// Where one store keeps its data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreLocation {
    File(PathBuf),
    Memory,
}

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub key_value_stores: BTreeMap<String, StoreLocation>,
    pub sqlite_databases: BTreeMap<String, StoreLocation>,
    /// Keep upstream connections alive between requests (Spin's default).
    pub connection_pooling: bool,
}

impl RuntimeConfig {
    /// Spin's defaults for an app in `app_dir`.
    pub fn defaults(app_dir: &Path) -> Self {
        let state = app_dir.join(".spin");
        Self {
            key_value_stores: BTreeMap::from([(
                "default".to_string(),
                StoreLocation::File(state.join("sqlite_key_value.db")),
            )]),
            sqlite_databases: BTreeMap::from([(
                "default".to_string(),
                StoreLocation::File(state.join("sqlite_db.db")),
            )]),
            connection_pooling: true,
        }
    }

    /// Every store in memory. As in Spin, an in-memory key-value store lives as
    /// long as the app, an in-memory database only as long as one `open`.
    pub fn in_memory() -> Self {
        Self {
            key_value_stores: BTreeMap::from([("default".to_string(), StoreLocation::Memory)]),
            sqlite_databases: BTreeMap::from([("default".to_string(), StoreLocation::Memory)]),
            connection_pooling: true,
        }
    }

    /// Spin's defaults overlaid with the entries of a runtime-config file.
    pub fn from_file(path: &Path, app_dir: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading runtime config {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, base, app_dir).with_context(|| format!("in {}", path.display()))
    }

    pub fn parse(text: &str, base: &Path, app_dir: &Path) -> Result<Self> {
        let raw: RawRuntimeConfig = toml::from_str(text)?;
        let mut config = Self::defaults(app_dir);
        for (label, store) in raw.key_value_store {
            config.key_value_stores.insert(label.clone(), store.location(base, &label)?);
        }
        for (label, store) in raw.sqlite_database {
            config.sqlite_databases.insert(label.clone(), store.location(base, &label)?);
        }
        if let Some(outbound) = raw.outbound_http {
            config.connection_pooling = outbound.connection_pooling;
        }
        Ok(config)
    }
}

impl RawStore {
    fn location(self, base: &Path, label: &str) -> Result<StoreLocation> {
        if self.kind != "spin" {
            bail!("store '{label}': type '{}' is not supported by this host (only \"spin\")", self.kind);
        }
        Ok(match self.path {
            Some(p) => StoreLocation::File(base.join(p)),
            None => StoreLocation::Memory,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_entries_override_defaults_relative_to_the_file() {
        let text = r#"
[key_value_store.default]
type = "spin"
path = "state/kv.db"
[key_value_store.cache]
type = "spin"
[sqlite_database.default]
type = "spin"
path = "/abs/db.sqlite"
"#;
        let c = RuntimeConfig::parse(text, Path::new("/cfg"), Path::new("/app")).unwrap();
        assert_eq!(c.key_value_stores["default"], StoreLocation::File("/cfg/state/kv.db".into()));
        assert_eq!(c.key_value_stores["cache"], StoreLocation::Memory);
        assert_eq!(c.sqlite_databases["default"], StoreLocation::File("/abs/db.sqlite".into()));
    }

    #[test]
    fn defaults_match_spin_and_unknown_types_are_refused() {
        let c = RuntimeConfig::defaults(Path::new("/app"));
        assert_eq!(c.key_value_stores["default"], StoreLocation::File("/app/.spin/sqlite_key_value.db".into()));
        assert!(
            RuntimeConfig::parse("[key_value_store.x]\ntype = \"redis\"\n", Path::new("/"), Path::new("/")).is_err()
        );
        assert!(RuntimeConfig::parse("[nonsense]\n", Path::new("/"), Path::new("/")).is_err());
    }

    #[test]
    fn connection_pooling_is_on_by_default_and_follows_spins_table() {
        let parse = |text: &str| RuntimeConfig::parse(text, Path::new("/"), Path::new("/"));
        assert!(RuntimeConfig::defaults(Path::new("/app")).connection_pooling);
        assert!(parse("").unwrap().connection_pooling);
        assert!(!parse("[outbound_http]\nconnection_pooling = false\n").unwrap().connection_pooling);
        assert!(parse("[outbound_http]\nconnection_pooling = true\n").unwrap().connection_pooling);
        // Spin's serde default: the table without the key means false.
        assert!(!parse("[outbound_http]\n").unwrap().connection_pooling);
        assert!(parse("[outbound_http]\nmax_connections = 4\n").is_err());
    }
}
