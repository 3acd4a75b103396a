//! Test support: run an app on an ephemeral port with variables overridden and
//! upstream hosts redirected to in-process mock servers that record requests
//! and count their open connections.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::app::{App, AppOptions};
use crate::files::FilesMountStrategy;
use crate::log::LogSink;
use crate::runtime_config::RuntimeConfig;
use crate::server::{spawn, RunningServer};
use crate::variables::VariableSources;

/// An app served on 127.0.0.1:<ephemeral>, stopped when dropped.
pub struct TestApp {
    pub app: App,
    pub addr: SocketAddr,
    _server: RunningServer,
    _scratch: Arc<tempfile::TempDir>,
}

/// Options for [`TestApp::start`].
pub struct TestAppOptions {
    pub manifest: PathBuf,
    pub variables: HashMap<String, String>,
    pub redirects: HashMap<String, SocketAddr>,
    pub runtime_config: RuntimeConfig,
    pub files: FilesMountStrategy,
    /// A directory that lives as long as the app (its default database is here).
    pub scratch: Arc<tempfile::TempDir>,
}

impl TestAppOptions {
    /// The key-value store in memory (shared by every request, as in Spin) and the
    /// `default` database in a scratch file: Spin's in-memory SQLite is a new, empty
    /// database per `open`, so nothing stateful could be tested on one.
    pub fn new(manifest: impl Into<PathBuf>) -> Self {
        let scratch =
            Arc::new(tempfile::Builder::new().prefix("ratatoskr-test-").tempdir().expect("a scratch directory"));
        let mut runtime_config = RuntimeConfig::in_memory();
        runtime_config.sqlite_databases.insert(
            "default".to_string(),
            crate::runtime_config::StoreLocation::File(scratch.path().join("sqlite_db.db")),
        );
        Self {
            manifest: manifest.into(),
            variables: HashMap::new(),
            redirects: HashMap::new(),
            runtime_config,
            files: FilesMountStrategy::Copy,
            scratch,
        }
    }

    /// Mounts `files` in place, as `spin up --direct-mounts` (default: copied at start-up).
    pub fn direct_mounts(mut self) -> Self {
        self.files = FilesMountStrategy::Direct;
        self
    }

    pub fn variable(mut self, name: &str, value: &str) -> Self {
        self.variables.insert(name.to_string(), value.to_string());
        self
    }

    /// Sends requests for `authority` (`host:port`) to `mock` instead.
    pub fn redirect(mut self, authority: &str, mock: &MockUpstream) -> Self {
        self.redirects.insert(authority.to_string(), mock.addr);
        self
    }
}

impl TestApp {
    pub async fn start(options: TestAppOptions) -> anyhow::Result<Self> {
        let app = App::load(AppOptions {
            manifest: options.manifest,
            runtime_config: options.runtime_config,
            // Only explicit values: tests never read this process's SPIN_VARIABLE_*.
            variables: VariableSources { explicit: options.variables, environment: HashMap::new() },
            redirects: options.redirects,
            log: LogSink::memory(),
            files: options.files,
        })?;
        let server = spawn(app.clone(), SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        Ok(Self { app, addr: server.addr, _server: server, _scratch: options.scratch })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Everything the host logged, guest output included.
    pub fn log(&self) -> String {
        self.app.log().contents()
    }
}

/// What a mock upstream saw.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: http::Method,
    pub path_and_query: String,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

pub type MockBody = BoxBody<Bytes, Infallible>;
type Handler =
    Arc<dyn Fn(RecordedRequest) -> Pin<Box<dyn Future<Output = http::Response<MockBody>> + Send>> + Send + Sync>;

/// A scripted upstream on 127.0.0.1:<ephemeral>.
pub struct MockUpstream {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
    open_connections: Arc<AtomicUsize>,
    accepted_connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Decrements the open-connection gauge however the connection task ends.
struct ConnectionGauge(Arc<AtomicUsize>);

impl Drop for ConnectionGauge {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl MockUpstream {
    pub async fn start<F, Fut>(handler: F) -> Self
    where
        F: Fn(RecordedRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = http::Response<MockBody>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |r| Box::pin(handler(r)));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind mock");
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let open_connections = Arc::new(AtomicUsize::new(0));
        let accepted_connections = Arc::new(AtomicUsize::new(0));
        let (recorded, open, accepted) = (requests.clone(), open_connections.clone(), accepted_connections.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                open.fetch_add(1, Ordering::SeqCst);
                accepted.fetch_add(1, Ordering::SeqCst);
                let gauge = ConnectionGauge(open.clone());
                let (handler, recorded) = (handler.clone(), recorded.clone());
                tokio::spawn(async move {
                    let _gauge = gauge;
                    let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                        let (handler, recorded) = (handler.clone(), recorded.clone());
                        async move {
                            let (parts, body) = request.into_parts();
                            let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let seen = RecordedRequest {
                                method: parts.method,
                                path_and_query: parts.uri.path_and_query().map(|p| p.to_string()).unwrap_or_default(),
                                headers: parts.headers,
                                body,
                            };
                            recorded.lock().unwrap().push(seen.clone());
                            Ok::<_, Infallible>(handler(seen).await)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, requests, open_connections, accepted_connections, task }
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().unwrap().clone()
    }

    pub fn open_connections(&self) -> usize {
        self.open_connections.load(Ordering::SeqCst)
    }

    /// Connections accepted since the start, open or closed.
    pub fn accepted_connections(&self) -> usize {
        self.accepted_connections.load(Ordering::SeqCst)
    }

    /// Waits until the gauge reads `n`; returns how long that took, or `None`.
    pub async fn wait_for_open_connections(&self, n: usize, timeout: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < timeout {
            if self.open_connections() == n {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        None
    }
}

/// A fixed response.
pub fn respond(status: u16, content_type: &str, body: impl Into<Bytes>) -> http::Response<MockBody> {
    http::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).boxed())
        .unwrap()
}

/// A streaming response fed chunk by chunk through the returned sender; the
/// body ends when the sender is dropped.
pub fn streaming(
    status: u16,
    content_type: &str,
) -> (tokio::sync::mpsc::UnboundedSender<Bytes>, http::Response<MockBody>) {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let stream = futures::stream::unfold(receiver, |mut rx| async move {
        rx.recv().await.map(|chunk| (Ok::<_, Infallible>(Frame::data(chunk)), rx))
    });
    let response = http::Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .unwrap();
    (sender, response)
}
