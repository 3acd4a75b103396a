//! The HTTP/1.1 front door: accept, route, dispatch, log one line per request.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::app::{bare_response, App, ResponseBody};
use crate::log::LogSink;

impl App {
    /// Serves until `shutdown` resolves. Each connection and request runs on
    /// its own task; the listener is already bound so callers know the port.
    pub async fn serve(self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
        tokio::pin!(shutdown);
        loop {
            let (stream, client) = tokio::select! {
                accepted = listener.accept() => accepted?,
                () = &mut shutdown => return Ok(()),
            };
            // No TCP_NODELAY: Spin 4.0.2 leaves Nagle on for accepted connections,
            // so a component that writes a body in many small flushes is slow
            // there; the host shows the same cost rather than hiding it.
            let app = self.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    let app = app.clone();
                    async move { Ok::<_, Infallible>(app.handle(request, client).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(std::time::Duration::from_secs(30))
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }

    /// Handles one request: the same path `spin up` takes.
    pub async fn handle(&self, request: hyper::Request<Incoming>, client: SocketAddr) -> hyper::Response<LoggedBody> {
        let started = Instant::now();
        let method = request.method().clone();
        // Log the path only: queries can carry tokens.
        let path = request.uri().path().to_string();
        let log_line = move |component: &str, status: u16, log: &LogSink| {
            let line =
                format!("{method} {path} -> {component} {status} {:.2}ms", started.elapsed().as_secs_f64() * 1e3);
            log.line(&line);
        };

        let Some(host) =
            request.uri().authority().map(|a| a.to_string()).or_else(|| {
                request.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()).map(str::to_string)
            })
        else {
            log_line("-", 400, self.log());
            return LoggedBody::unlogged(bare_response(400, b""));
        };
        let path_and_query = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let full_url = format!("http://{host}{path_and_query}");

        // Spin's reserved paths: health, app info, and nothing else.
        if let Some(well_known) = request.uri().path().strip_prefix("/.well-known/spin/") {
            let response = match well_known {
                "health" => bare_response(200, b"OK"),
                "info" => self.info_response(),
                _ => bare_response(404, b""),
            };
            log_line("-", response.status().as_u16(), self.log());
            return LoggedBody::unlogged(response);
        }
        let Some(route) = self.route(request.uri().path()) else {
            log_line("-", 404, self.log());
            return LoggedBody::unlogged(bare_response(404, b""));
        };

        let response = match self.inner.dispatch(&route, request, full_url, Some(client)).await {
            Ok(response) => response,
            Err(error) => {
                self.log().line(&format!("[{}] dispatch failed: {error:#}", route.component_id));
                bare_response(500, b"")
            }
        };
        let status = response.status().as_u16();
        let log = self.log().clone();
        let component = route.component_id.clone();
        response.map(|inner| LoggedBody { inner, on_end: Some(Box::new(move || log_line(&component, status, &log))) })
    }
}

/// Writes the request's log line when the response is over: at the body's end,
/// or when the client goes away mid-stream (so durations include streaming).
pub struct LoggedBody {
    inner: ResponseBody,
    on_end: Option<Box<dyn FnOnce() + Send>>,
}

impl LoggedBody {
    fn unlogged(response: hyper::Response<ResponseBody>) -> hyper::Response<Self> {
        response.map(|inner| LoggedBody { inner, on_end: None })
    }
}

impl Body for LoggedBody {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        if let Some(on_end) = self.on_end.take() {
            on_end();
        }
    }
}

/// Serves `app` on `addr` in the background; returns the bound address and a
/// handle that stops the server when dropped.
pub async fn spawn(app: App, addr: SocketAddr) -> anyhow::Result<RunningServer> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = app
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    Ok(RunningServer { addr: local, _stop: stop, task: Arc::new(task) })
}

pub struct RunningServer {
    pub addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
