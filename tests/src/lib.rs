//! Shared helpers for the component tests: where the repo and the built
//! components are, small HTTP conveniences, and the app under test, which runs
//! on the repo's host, in the real-Spin lane under `spin up`, or in the
//! portable lanes as the portable console under `wasmtime serve` or `jco serve`.

use std::net::SocketAddr;
use std::path::PathBuf;

pub use ratatoskr_host::runtime_config::StoreLocation;
pub use ratatoskr_host::sqlite::{SqlValue, SqliteDatabases};
pub use ratatoskr_host::testing::{respond, streaming, MockUpstream, TestAppOptions};

pub mod openapi;
pub mod portable;
mod spin_up;

pub use spin_up::spin_bin;

/// The runtime the component tests drive: `RATATOSKR_TEST_RUNTIME=spin` (with
/// `SPIN_BIN`) selects real Spin, `wasmtime-serve` (with `WASMTIME_BIN`) and
/// `jco` (`JCO_BIN`, or the pinned jco in tests/runtimes) the portable
/// console on those runtimes; anything else, the repo's host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Runtime {
    Host,
    Spin(PathBuf),
    WasmtimeServe(PathBuf),
    Jco(PathBuf),
}

impl Runtime {
    pub fn selected() -> Runtime {
        match std::env::var("RATATOSKR_TEST_RUNTIME").as_deref() {
            Ok("spin") => {
                Runtime::Spin(spin_bin().expect("RATATOSKR_TEST_RUNTIME=spin needs SPIN_BIN, the spin binary"))
            }
            Ok("wasmtime-serve") => Runtime::WasmtimeServe(
                portable::wasmtime_bin().expect("RATATOSKR_TEST_RUNTIME=wasmtime-serve needs WASMTIME_BIN"),
            ),
            Ok("jco") => Runtime::Jco(portable::jco_bin().expect("RATATOSKR_TEST_RUNTIME=jco needs JCO_BIN or npm ci")),
            _ => Runtime::Host,
        }
    }

    /// A runtime that serves the portable console, not spin.toml.
    pub fn is_portable(&self) -> bool {
        matches!(self, Runtime::WasmtimeServe(_) | Runtime::Jco(_))
    }
}

/// True (after saying why) when the test needs what only the repo's host offers
/// (a movable clock, its request log): the other lanes then skip it.
pub fn host_only(reason: &str) -> bool {
    skip_unless(Runtime::selected() == Runtime::Host, reason)
}

/// True (after saying why) when the test needs a part of the Spin app the
/// portable console does not have (the simulator, the Playground, a key-value
/// store, spin.toml's own origins): the portable lanes then skip it.
pub fn spin_app_only(reason: &str) -> bool {
    skip_unless(!Runtime::selected().is_portable(), reason)
}

/// True (after saying why) on `jco serve`, for a test of what its Node shim
/// does not do as the other runtimes do (docs/runtimes.md, "Other WASI
/// runtimes", lists each): the jco lane then skips it.
pub fn not_on_jco(reason: &str) -> bool {
    skip_unless(!matches!(Runtime::selected(), Runtime::Jco(_)), reason)
}

fn skip_unless(runs: bool, reason: &str) -> bool {
    if !runs {
        let test = std::thread::current().name().unwrap_or("?").to_string();
        eprintln!("skipped on {:?}: {reason}", Runtime::selected());
        // The lane lists what it did not run (scripts/test.sh prints this file).
        if let Some(path) = std::env::var_os("RATATOSKR_SKIP_LOG") {
            use std::io::Write;
            if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
                let _ = writeln!(file, "{test}: {reason}");
            }
        }
    }
    !runs
}

/// The app under test, served on 127.0.0.1:<port>, stopped when dropped.
pub struct TestApp {
    pub addr: SocketAddr,
    backend: Backend,
    databases: std::collections::BTreeMap<String, StoreLocation>,
}

enum Backend {
    Host(ratatoskr_host::testing::TestApp),
    Spin(spin_up::SpinUp),
    Portable(portable::Served),
}

impl TestApp {
    pub async fn start(options: TestAppOptions) -> anyhow::Result<Self> {
        Self::start_on(&Runtime::selected(), options).await
    }

    pub async fn start_on(runtime: &Runtime, options: TestAppOptions) -> anyhow::Result<Self> {
        let databases = options.runtime_config.sqlite_databases.clone();
        let (addr, backend) = match runtime {
            Runtime::Host => {
                let app = ratatoskr_host::testing::TestApp::start(options).await?;
                (app.addr, Backend::Host(app))
            }
            Runtime::Spin(bin) => {
                let up = spin_up::SpinUp::start(bin, options).await?;
                (up.addr, Backend::Spin(up))
            }
            portable => {
                let served = portable::Served::start(portable, &options).await?;
                (served.addr, Backend::Portable(served))
            }
        };
        openapi::register_app(addr);
        Ok(TestApp { addr, backend, databases })
    }

    /// The portable console with these options' variables and redirects: on
    /// the selected portable runtime, else in the lane's own runtime from a
    /// manifest of that one component ([`portable::manifest`]).
    pub async fn start_portable(options: TestAppOptions) -> anyhow::Result<Self> {
        let runtime = Runtime::selected();
        if runtime.is_portable() {
            return Self::start_on(&runtime, options).await;
        }
        let mut options = TestAppOptions { manifest: portable::manifest(&options)?, ..options };
        options.variables.clear();
        Self::start_on(&runtime, options).await
    }

    /// Runs one statement on the app's database file `label`, beside the app (tests
    /// look at what was stored, or age a row where they cannot move Spin's clock).
    pub fn sql(&self, label: &str, statement: &str) -> Vec<Vec<SqlValue>> {
        let Some(StoreLocation::File(path)) = self.databases.get(label) else {
            panic!("database {label} is not a file of this app");
        };
        let dbs = SqliteDatabases::open(&std::collections::BTreeMap::from([(
            label.to_string(),
            StoreLocation::File(path.clone()),
        )]))
        .unwrap();
        dbs.connect(label).unwrap().execute(statement, &[]).unwrap().rows
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Everything the runtime logged, guest output included.
    pub fn log(&self) -> String {
        match &self.backend {
            Backend::Host(app) => app.log(),
            Backend::Spin(up) => up.log(),
            Backend::Portable(served) => served.log(),
        }
    }

    /// The repo's host behind this app; tests that need it check [`host_only`] first.
    pub fn host(&self) -> &ratatoskr_host::App {
        match &self.backend {
            Backend::Host(app) => &app.app,
            _ => panic!("this test needs the repo's host; guard it with host_only()"),
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        openapi::unregister_app(self.addr);
    }
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Fails with a clear message when the wasm components were not built.
pub fn require_wasm(name: &str) -> PathBuf {
    let path = repo_root().join("target/wasm32-wasip2/release").join(name);
    assert!(path.exists(), "{} is missing: build the components first (scripts/test.sh does)", path.display());
    path
}

pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(name)
}

/// The tests' HTTP client. Requests to an app under test go through the
/// OpenAPI conformance proxy ([`openapi`]), which passes them on unchanged and
/// checks every `/api/...` and `/admin/v1/...` answer against `static/openapi.yaml`.
pub fn client() -> reqwest::Client {
    let proxy = openapi::proxy_url();
    let conformance = reqwest::Proxy::custom(move |url| openapi::proxied(url).then(|| proxy.clone()));
    reqwest::Client::builder().no_proxy().proxy(conformance).build().unwrap()
}

/// A client without the conformance proxy, for what benchmarks measure: the
/// proxy's extra hop and per-event schema checks are the harness, not the app.
pub fn bench_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// CPU time the hypervisor gave to others while this machine's vCPUs wanted
/// to run (`steal` in /proc/stat, all vCPUs, in USER_HZ ticks = 10 ms on Linux),
/// for the benches' steal columns. Runs with steal show it: a vCPU not running
/// delays every hop behind it.
pub fn steal_ms() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.split_whitespace().collect::<Vec<_>>();
    Some(cpu.get(8)?.parse::<u64>().ok()? * 10)
}
