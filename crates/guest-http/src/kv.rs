//! Key-value storage as the components' pure cores see it: the [`Kv`]
//! trait, Spin's `default` store behind it in the component ([`SpinKv`], on
//! wasm32), and an in-memory map in the native tests ([`MemKv`], feature
//! `testing`). Spin's runtime config decides where the store lives (SQLite
//! on one host, Redis on SpinKube), with no change here.

use std::fmt;

/// A store failed (or could not be opened); the detail is for the log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvError(pub String);

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "key-value store: {}", self.0)
    }
}

/// What the components need of a key-value store.
pub trait Kv {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError>;
    fn set(&self, key: &str, value: &[u8]) -> Result<(), KvError>;
    fn delete(&self, key: &str) -> Result<(), KvError>;
    fn exists(&self, key: &str) -> Result<bool, KvError>;
    fn keys(&self) -> Result<Vec<String>, KvError>;
}

/// Spin's `default` store (the component must list it in
/// `key_value_stores`).
#[cfg(target_arch = "wasm32")]
pub struct SpinKv(spin_sdk::key_value::Store);

#[cfg(target_arch = "wasm32")]
impl SpinKv {
    pub fn open_default() -> Result<SpinKv, KvError> {
        spin_sdk::key_value::Store::open_default().map(SpinKv).map_err(err)
    }
}

#[cfg(target_arch = "wasm32")]
fn err(e: spin_sdk::key_value::Error) -> KvError {
    KvError(format!("{e:?}"))
}

#[cfg(target_arch = "wasm32")]
impl Kv for SpinKv {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        self.0.get(key).map_err(err)
    }
    fn set(&self, key: &str, value: &[u8]) -> Result<(), KvError> {
        self.0.set(key, value).map_err(err)
    }
    fn delete(&self, key: &str) -> Result<(), KvError> {
        self.0.delete(key).map_err(err)
    }
    fn exists(&self, key: &str) -> Result<bool, KvError> {
        self.0.exists(key).map_err(err)
    }
    fn keys(&self) -> Result<Vec<String>, KvError> {
        self.0.get_keys().map_err(err)
    }
}

/// An in-memory store for native tests.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Default)]
pub struct MemKv(pub std::cell::RefCell<std::collections::BTreeMap<String, Vec<u8>>>);

#[cfg(any(test, feature = "testing"))]
impl Kv for MemKv {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        Ok(self.0.borrow().get(key).cloned())
    }
    fn set(&self, key: &str, value: &[u8]) -> Result<(), KvError> {
        self.0.borrow_mut().insert(key.to_string(), value.to_vec());
        Ok(())
    }
    fn delete(&self, key: &str) -> Result<(), KvError> {
        self.0.borrow_mut().remove(key);
        Ok(())
    }
    fn exists(&self, key: &str) -> Result<bool, KvError> {
        Ok(self.0.borrow().contains_key(key))
    }
    fn keys(&self) -> Result<Vec<String>, KvError> {
        Ok(self.0.borrow().keys().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_store_keeps_what_is_set_until_deleted() {
        let kv = MemKv::default();
        assert_eq!(kv.get("a"), Ok(None));
        kv.set("b", b"2").unwrap();
        kv.set("a", b"1").unwrap();
        assert_eq!(
            (kv.get("a"), kv.exists("a"), kv.keys()),
            (Ok(Some(b"1".to_vec())), Ok(true), Ok(vec!["a".into(), "b".into()]))
        );
        kv.delete("a").unwrap();
        assert_eq!((kv.get("a"), kv.exists("a")), (Ok(None), Ok(false)));
    }
}
