//! Shared helpers for the component tests: where the repo and the built
//! components are, and small HTTP conveniences.

use std::path::PathBuf;

pub use ratatoskr_host::testing::{respond, streaming, MockUpstream, TestApp, TestAppOptions};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Fails with a clear message when the wasm components were not built.
pub fn require_wasm(name: &str) -> PathBuf {
    let path = repo_root().join("target/wasm32-wasip2/release").join(name);
    assert!(
        path.exists(),
        "{} is missing: build the components first (scripts/test.sh does)",
        path.display()
    );
    path
}

pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(name)
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}
