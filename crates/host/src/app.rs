//! A loaded Spin application: one engine, every component compiled and
//! pre-instantiated once, and per-request dispatch into a fresh store.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::WasiHttpView;

use crate::clock::Clock;
use crate::files::{component_mounts, FilesMountStrategy, Mounting};
use crate::guest_run::{self, GuestBody, GuestRun};
use crate::key_value::KeyValueStores;
use crate::log::{GuestOutput, LogSink};
use crate::manifest::Manifest;
use crate::memory::MemoryPeak;
use crate::outbound::AllowedHosts;
use crate::outbound_pool::Pool;
use crate::routing::{RouteMatch, Router};
use crate::runtime_config::RuntimeConfig;
use crate::sqlite::SqliteDatabases;
use crate::state::RequestState;
use crate::variables::{ComponentVariables, ResolvedVariables, VariableSources};

/// How to load an application.
pub struct AppOptions {
    pub manifest: PathBuf,
    pub runtime_config: RuntimeConfig,
    pub variables: VariableSources,
    /// `host:port` -> address: outgoing requests to that authority go to the
    /// given socket instead (tests point upstream names at mock servers).
    pub redirects: HashMap<String, SocketAddr>,
    pub log: LogSink,
    /// `spin up`'s default (copy at start-up) or `--direct-mounts`.
    pub files: FilesMountStrategy,
}

/// What a component may do, resolved from the manifest at load.
#[derive(Debug)]
pub struct ComponentConfig {
    pub id: String,
    pub variables: ComponentVariables,
    pub key_value_stores: HashSet<String>,
    pub sqlite_databases: HashSet<String>,
    pub allowed_hosts: AllowedHosts,
    pub mounts: Vec<(PathBuf, String)>,
    pub environment: Vec<(String, String)>,
}

struct LoadedComponent {
    config: Arc<ComponentConfig>,
    pre: ProxyPre<RequestState>,
    /// The most linear memory one of its instances has had (see [`App::take_memory_peak`]).
    memory_peak: MemoryPeak,
}

pub struct AppInner {
    router: Router,
    components: HashMap<String, LoadedComponent>,
    pub(crate) key_value: KeyValueStores,
    pub(crate) sqlite: SqliteDatabases,
    pub(crate) clock: Clock,
    pub(crate) redirects: HashMap<String, SocketAddr>,
    /// Kept-alive upstream connections, shared by every component (as Spin's per-app clients).
    pub(crate) upstreams: Arc<Pool>,
    pub(crate) log: LogSink,
    /// `/.well-known/spin/info`: the application's name and version, as Spin serves it.
    info: Bytes,
    /// The per-run `spinup-*` directory holding the copied files; removed with the app.
    _working_dir: Option<tempfile::TempDir>,
}

/// A running application, cheap to clone.
#[derive(Clone)]
pub struct App {
    pub(crate) inner: Arc<AppInner>,
}

/// One engine per process: compiled code, the instance pool and the epoch
/// ticker are shared by every app loaded in it (tests load several).
fn engine() -> Result<Engine> {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    if let Some(engine) = ENGINE.get() {
        return Ok(engine.clone());
    }
    let mut config = Config::new();
    config.epoch_interruption(true);
    // Pooling: instance slots are reserved up front, so per-request
    // instantiation is a few memcpys (host-notes: ~25% faster than on-demand).
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(1000)
        .total_core_instances(2000)
        .total_memories(1000)
        .total_tables(1000)
        .max_memory_size(256 << 20)
        // As Spin 4.0.2 (crates/core), with its environment overrides: a freed
        // slot's first 2 MiB of linear memory and 512 KiB of table are zeroed
        // in place, not madvise'd away, so the next request neither faults
        // them back in nor makes every core flush its TLB.
        .linear_memory_keep_resident(env_bytes("SPIN_WASMTIME_LINEAR_MEMORY_KEEP_RESIDENT", 2 << 20)?)
        .table_keep_resident(env_bytes("SPIN_WASMTIME_TABLE_KEEP_RESIDENT", 512 << 10)?);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // `RATATOSKR_WASM_PROFILE=perfmap` names JIT code for `perf record`
    // (the profiles in docs/benchmarks/runs.md); off by default, it costs nothing then.
    if std::env::var("RATATOSKR_WASM_PROFILE").as_deref() == Ok("perfmap") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    // Compiled code is cached on disk between runs (wasmtime's own cache).
    if let Ok(cache) = wasmtime::Cache::from_file(None) {
        config.cache(Some(cache));
    }
    let engine = ENGINE.get_or_init(|| {
        let engine = Engine::new(&config).expect("engine configuration is valid");
        start_epoch_ticker(engine.clone());
        engine
    });
    Ok(engine.clone())
}

/// A byte count from the environment, as Spin reads its pooling knobs (an
/// unparsable value stops start-up there too).
fn env_bytes(name: &str, default: usize) -> Result<usize> {
    match std::env::var(name) {
        Ok(value) => value.parse().map_err(|e| anyhow::anyhow!("failed to parse env var `{name}={value}`: {e}")),
        Err(_) => Ok(default),
    }
}

/// Bumps the engine epoch so guests yield to the runtime regularly: a
/// CPU-bound guest cannot starve other requests, and nothing cuts a long,
/// legitimate stream (no deadline, only yields).
fn start_epoch_ticker(engine: Engine) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(10));
        engine.increment_epoch();
    });
}

/// Compiles each component file once per process (keyed by path, size and
/// modification time, so a rebuilt .wasm is picked up).
fn compile(engine: &Engine, source: &Path) -> Result<Component> {
    type Key = (PathBuf, u64, Option<std::time::SystemTime>);
    static COMPILED: OnceLock<Mutex<HashMap<Key, Component>>> = OnceLock::new();
    let meta = std::fs::metadata(source)?;
    let key = (source.to_path_buf(), meta.len(), meta.modified().ok());
    let cache = COMPILED.get_or_init(Default::default);
    if let Some(component) = cache.lock().unwrap().get(&key) {
        return Ok(component.clone());
    }
    let component = Component::from_file(engine, source)?;
    cache.lock().unwrap().insert(key, component.clone());
    Ok(component)
}

impl App {
    pub fn load(options: AppOptions) -> Result<Self> {
        let manifest = Manifest::from_file(&options.manifest)?;
        // `spin.toml` alone has the empty path as its parent: that is the current directory.
        let app_dir = options
            .manifest
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let variables = ResolvedVariables::resolve(&manifest.variables, &options.variables)?;
        let (router, warnings) = Router::build(&manifest.trigger.http)?;
        for warning in warnings {
            options.log.line(&format!("warning: {warning}"));
        }
        let key_value = KeyValueStores::open(&options.runtime_config.key_value_stores)?;
        let sqlite = SqliteDatabases::open(&options.runtime_config.sqlite_databases)?;

        let (working_dir, mount_root) = match &options.files {
            FilesMountStrategy::Copy => {
                let dir = tempfile::TempDir::with_prefix("spinup-")?;
                let assets = dir.path().join("assets");
                (Some(dir), assets)
            }
            FilesMountStrategy::CopyInto(dir) => (None, dir.join("assets")),
            FilesMountStrategy::Direct => (None, std::env::current_dir()?),
        };
        let mounting = match options.files {
            FilesMountStrategy::Direct => Mounting::Direct { run_dir: &mount_root },
            _ => Mounting::Copy { assets_root: &mount_root },
        };

        let engine = engine()?;
        let mut linker = Linker::<RequestState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
        crate::spin_imports::add_to_linker(&mut linker)?;

        let mut components = HashMap::new();
        for trigger in &manifest.trigger.http {
            let id = &trigger.component;
            if components.contains_key(id) {
                continue;
            }
            let decl = &manifest.component[id];
            for label in &decl.key_value_stores {
                if key_value.get(label).is_none() {
                    bail!("component '{id}' uses key-value store '{label}', which is not configured");
                }
            }
            for label in &decl.sqlite_databases {
                if !options.runtime_config.sqlite_databases.contains_key(label) {
                    bail!("component '{id}' uses sqlite database '{label}', which is not configured");
                }
            }
            let mounts = component_mounts(mounting, &app_dir, id, &decl.files, &decl.exclude_files)
                .with_context(|| format!("Failed to load component `{id}`"))?;
            let config = ComponentConfig {
                id: id.clone(),
                variables: ComponentVariables::new(&decl.variables, &variables)
                    .with_context(|| format!("component '{id}' variables"))?,
                key_value_stores: decl.key_value_stores.iter().cloned().collect(),
                sqlite_databases: decl.sqlite_databases.iter().cloned().collect(),
                allowed_hosts: AllowedHosts::parse(&decl.allowed_outbound_hosts, &variables)
                    .with_context(|| format!("component '{id}' allowed_outbound_hosts"))?,
                mounts,
                environment: decl.environment.clone().into_iter().collect(),
            };
            let source = app_dir.join(&decl.source);
            let started = Instant::now();
            let component = compile(&engine, &source).with_context(|| {
                format!("loading component '{id}' from {} (build it first: see README)", source.display())
            })?;
            let pre = ProxyPre::new(linker.instantiate_pre(&component)?)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("component '{id}' is not a wasi:http proxy"))?;
            options.log.line(&format!("loaded component '{id}' in {:.0} ms", started.elapsed().as_secs_f64() * 1e3));
            components.insert(
                id.clone(),
                LoadedComponent { config: Arc::new(config), pre, memory_peak: MemoryPeak::default() },
            );
        }

        let inner = AppInner {
            router,
            components,
            key_value,
            sqlite,
            clock: Clock::default(),
            redirects: options.redirects,
            upstreams: Pool::new(options.runtime_config.connection_pooling),
            log: options.log,
            info: app_info(&manifest.application.name, manifest.application.version.as_deref()),
            _working_dir: working_dir,
        };
        Ok(App { inner: Arc::new(inner) })
    }

    /// Upstream connections idle in the pool now.
    pub fn idle_upstream_connections(&self) -> usize {
        self.inner.upstreams.idle_count()
    }

    pub fn log(&self) -> &LogSink {
        &self.inner.log
    }

    /// The wall clock guests see (tests move it to expire tokens and sessions).
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    pub(crate) fn info_response(&self) -> http::Response<ResponseBody> {
        http::Response::builder()
            .header("content-type", "application/json")
            .body(fixed_body(self.inner.info.clone()))
            .expect("static response")
    }

    pub fn route(&self, path: &str) -> Option<RouteMatch> {
        self.inner.router.route(path)
    }

    /// The most linear memory (bytes, all its memories together) any one
    /// instance of `component` has had since the last call, which starts
    /// over; `None` for an unknown component. Measured by each store's
    /// `ResourceLimiter` ([`crate::memory`]) as the guest grows its memory.
    pub fn take_memory_peak(&self, component: &str) -> Option<usize> {
        self.inner.components.get(component).map(|c| c.memory_peak.take())
    }
}

impl AppInner {
    /// Runs one request through a component in a fresh store. Resolves when
    /// the guest has set its response head; the body then streams. Dropping
    /// the returned future or the body before its end ends the instance.
    pub(crate) async fn dispatch<B>(
        self: &Arc<Self>,
        route: &RouteMatch,
        mut request: http::Request<B>,
        full_url: String,
        client: Option<SocketAddr>,
    ) -> Result<http::Response<ResponseBody>>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<wasmtime_wasi_http::Error>,
    {
        let component = self
            .components
            .get(&route.component_id)
            .with_context(|| format!("no component '{}'", route.component_id))?;
        let config = component.config.clone();

        // As Spin 4.0.2 (`prepare_request_headers`): the client's headers stay, a
        // client's own `spin-*` copies included, and Spin's values are appended
        // after them. A component must read the LAST value of a `spin-*` header.
        let headers = request.headers_mut();
        let client = client.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        for (name, value) in route.spin_headers(&full_url, client) {
            headers.append(http::HeaderName::from_bytes(name.as_bytes())?, http::HeaderValue::from_str(&value)?);
        }

        let mut wasi = WasiCtxBuilder::new();
        let output = GuestOutput::new(self.log.clone(), &config.id);
        wasi.stdout(output.clone()).stderr(output).envs(&config.environment);
        // Mounted files are small local reads: doing them inline beats a hop
        // through tokio's blocking pool per call (it doubled a 304's cost).
        wasi.allow_blocking_current_thread(true);
        wasi.wall_clock(self.clock.clone());
        for (host_dir, guest_dir) in &config.mounts {
            wasi.preopened_dir(host_dir, guest_dir, FsPerms::ReadOnly)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("mounting {} for '{}'", host_dir.display(), config.id))?;
        }
        let state = RequestState::new(self.clone(), config.clone(), wasi.build(), component.memory_peak.clone());
        let mut store = Store::new(component.pre.engine(), state);
        store.limiter(|state| &mut state.memory);
        store.epoch_deadline_async_yield_and_update(1);

        let (sender, receiver) = tokio::sync::oneshot::channel();
        let incoming = store.data_mut().http().new_incoming_request(Scheme::Http, request)?;
        let outparam = store.data_mut().http().new_response_outparam(sender)?;
        let pre = component.pre.clone();
        let log = self.log.clone();
        let id = config.id.clone();
        let mut run = GuestRun::new(Box::pin(async move {
            let result = async {
                let proxy = pre.instantiate_async(&mut store).await?;
                proxy.wasi_http_incoming_handler().call_handle(&mut store, incoming, outparam).await
            }
            .await;
            if let Err(trap) = result {
                // {:#} shows the trap chain; guest messages never carry our secrets.
                log.line(&format!("[{id}] component trapped: {trap:#}"));
            }
        }));
        // As Spin: the guest runs to its own end. This task runs it until the
        // head, the body from then on ([`crate::guest_run`]); a client that
        // leaves is noticed by the guest on its next write (which fails), and
        // nothing else ends the instance early, so a quiet stream must write
        // keepalives.
        match guest_run::until(&mut run, receiver).await {
            Ok(Ok(response)) => Ok(response.map(|body| GuestBody::new(body, run).boxed_unsync())),
            Ok(Err(code)) => Ok(error_response(&code)),
            // The guest returned (or trapped) without setting a response.
            Err(_) => Ok(error_response(&ErrorCode::InternalError(None))),
        }
    }
}

/// A response body: the guest's, streamed, or one the runtime made.
pub type ResponseBody = HyperOutgoingBody;

fn fixed_body(bytes: Bytes) -> ResponseBody {
    http_body_util::Full::new(bytes).map_err(|never| match never {}).boxed_unsync()
}

/// Spin's `AppInfo`, pretty-printed: `name`, and `version` when the manifest has one.
fn app_info(name: &str, version: Option<&str>) -> Bytes {
    let mut info = serde_json::Map::new();
    info.insert("name".into(), name.into());
    if let Some(version) = version {
        info.insert("version".into(), version.into());
    }
    serde_json::to_vec_pretty(&info).unwrap_or_default().into()
}

/// Spin answers a failed or trapped component with a bare 500 (no body).
fn error_response(_code: &ErrorCode) -> http::Response<ResponseBody> {
    bare_response(500, b"")
}

/// A response the runtime itself makes, as Spin makes them: a status, the body
/// if any, no content type (404 and 500 are empty; the health check says `OK`).
pub(crate) fn bare_response(status: u16, body: &'static [u8]) -> http::Response<ResponseBody> {
    http::Response::builder().status(status).body(fixed_body(Bytes::from_static(body))).expect("static response")
}

#[cfg(test)]
mod tests {
    use super::env_bytes;

    #[test]
    fn pooling_knobs_take_spins_environment_overrides() {
        std::env::set_var("RATATOSKR_TEST_KEEP_RESIDENT", "4096");
        std::env::set_var("RATATOSKR_TEST_KEEP_RESIDENT_BAD", "lots");
        assert_eq!(env_bytes("RATATOSKR_TEST_KEEP_RESIDENT", 7).unwrap(), 4096);
        let err = env_bytes("RATATOSKR_TEST_KEEP_RESIDENT_BAD", 7).unwrap_err().to_string();
        assert!(err.contains("RATATOSKR_TEST_KEEP_RESIDENT_BAD=lots"), "{err}");
        assert_eq!(env_bytes("RATATOSKR_TEST_KEEP_RESIDENT_UNSET", 7).unwrap(), 7);
    }
}
