//! Spin's "spin" key-value store: SQLite, one table shared by all labels of a
//! file, the same schema Spin uses so a `.spin/sqlite_key_value.db` written by
//! either runtime reads in the other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};

use crate::runtime_config::StoreLocation;

/// An open connection shared by every label stored in the same place.
pub type SharedConnection = Arc<Mutex<Connection>>;

/// All configured key-value stores, opened once at start-up.
#[derive(Clone, Default)]
pub struct KeyValueStores {
    by_label: HashMap<String, SharedConnection>,
}

impl KeyValueStores {
    pub fn open(locations: &std::collections::BTreeMap<String, StoreLocation>) -> Result<Self> {
        let mut by_location: HashMap<StoreLocation, SharedConnection> = HashMap::new();
        let mut by_label = HashMap::new();
        for (label, location) in locations {
            let conn = match by_location.get(location) {
                Some(conn) if *location != StoreLocation::Memory => conn.clone(),
                _ => {
                    let conn = Arc::new(Mutex::new(open_connection(location)?));
                    by_location.insert(location.clone(), conn.clone());
                    conn
                }
            };
            by_label.insert(label.clone(), conn);
        }
        Ok(Self { by_label })
    }

    pub fn get(&self, label: &str) -> Option<KeyValueStore> {
        self.by_label.get(label).map(|conn| KeyValueStore { label: label.to_string(), conn: conn.clone() })
    }
}

fn open_connection(location: &StoreLocation) -> Result<Connection> {
    let conn = match location {
        StoreLocation::Memory => Connection::open_in_memory()?,
        StoreLocation::File(path) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            Connection::open(path).with_context(|| format!("opening {}", path.display()))?
        }
    };
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS spin_key_value (
            store TEXT NOT NULL,
            key   TEXT NOT NULL,
            value BLOB NOT NULL,
            PRIMARY KEY (store, key)
        );",
    )?;
    Ok(conn)
}

/// One label's view of its store (the guest's `store` resource).
#[derive(Clone)]
pub struct KeyValueStore {
    label: String,
    conn: SharedConnection,
}

impl KeyValueStore {
    fn with<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, String> {
        let conn = self.conn.lock().map_err(|_| "store lock poisoned".to_string())?;
        f(&conn).map_err(|e| e.to_string())
    }

    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        self.with(|c| {
            c.prepare_cached("SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                .query_row(params![self.label, key], |row| row.get(0))
                .optional()
        })
    }

    pub fn set(&self, key: &str, value: &[u8]) -> Result<(), String> {
        self.with(|c| {
            c.prepare_cached(
                "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3)
                 ON CONFLICT(store, key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![self.label, key, value])
            .map(drop)
        })
    }

    pub fn delete(&self, key: &str) -> Result<(), String> {
        self.with(|c| {
            c.prepare_cached("DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                .execute(params![self.label, key])
                .map(drop)
        })
    }

    pub fn exists(&self, key: &str) -> Result<bool, String> {
        self.get(key).map(|v| v.is_some())
    }

    pub fn keys(&self) -> Result<Vec<String>, String> {
        self.with(|c| {
            c.prepare_cached("SELECT key FROM spin_key_value WHERE store = ?1")?
                .query_map(params![self.label], |row| row.get(0))?
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn labels_are_isolated_and_operations_round_trip() {
        let dir = std::env::temp_dir().join(format!("kv-test-{}", std::process::id()));
        let file = StoreLocation::File(dir.join("kv.db"));
        let stores = KeyValueStores::open(&BTreeMap::from([
            ("default".to_string(), file.clone()),
            ("other".to_string(), file),
            ("mem".to_string(), StoreLocation::Memory),
        ]))
        .unwrap();
        let a = stores.get("default").unwrap();
        let b = stores.get("other").unwrap();
        a.set("k", b"1").unwrap();
        a.set("k", b"2").unwrap();
        assert_eq!(a.get("k").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(b.get("k").unwrap(), None, "labels sharing a file stay separate");
        assert!(a.exists("k").unwrap());
        assert_eq!(a.keys().unwrap(), vec!["k".to_string()]);
        a.delete("k").unwrap();
        assert!(!a.exists("k").unwrap());
        assert!(stores.get("missing").is_none());
        stores.get("mem").unwrap().set("x", b"y").unwrap();
        std::fs::remove_dir_all(dir).ok();
    }
}
