//! The `wasi:http/outgoing-handler` hook: where the allow-list is enforced,
//! `*.spin.internal` is served in-process (service chaining), and tests
//! redirect named hosts to their mock upstreams.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::app::{AppInner, ComponentConfig};
use crate::outbound::{default_port, Target};
use crate::routing::RouteMatch;

const CHAINING_SUFFIX: &str = ".spin.internal";

type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;
type SendFuture = Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), Error>> + Send>;

pub struct OutboundHooks {
    app: Arc<AppInner>,
    component: Arc<ComponentConfig>,
}

impl OutboundHooks {
    pub fn new(app: Arc<AppInner>, component: Arc<ComponentConfig>) -> Self {
        Self { app, component }
    }
}

fn fail(error: Error) -> SendFuture {
    Box::new(async move { Err(error) })
}

impl WasiHttpHooks for OutboundHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> SendFuture {
        let uri = request.uri().clone();
        let scheme = uri.scheme_str().unwrap_or("http").to_ascii_lowercase();
        let Some(host) = uri.host().map(str::to_ascii_lowercase) else {
            return fail(Error::HttpRequestUriInvalid);
        };
        let Some(port) = uri.port_u16().or_else(|| default_port(&scheme)) else {
            return fail(Error::HttpRequestUriInvalid);
        };
        let target = Target { scheme: &scheme, host: &host, port };
        if !self.component.allowed_hosts.allows(&target) {
            // Spin answers HttpRequestDenied; say why on the host log, not to the guest.
            self.app.log.line(&format!(
                "[{}] outbound request to {scheme}://{host}:{port} denied: not in allowed_outbound_hosts",
                self.component.id
            ));
            return fail(Error::HttpRequestDenied);
        }

        if let Some(component_id) = host.strip_suffix(CHAINING_SUFFIX) {
            let app = self.app.clone();
            let component_id = component_id.to_string();
            // Spin drops the Host header of chained requests.
            request.headers_mut().remove(http::header::HOST);
            return Box::new(async move {
                let path = request.uri().path().to_string();
                let route = RouteMatch::chained(&component_id, &path);
                let full_url = request.uri().to_string();
                let response =
                    app.dispatch(&route, request, full_url, None).await.map_err(|_| Error::DestinationNotFound)?;
                let response = response.map(BodyExt::boxed_unsync);
                Ok((response, Box::new(async { Ok(()) }) as IoFuture))
            });
        }

        if let Some(addr) = self.app.redirects.get(&format!("{host}:{port}")) {
            // Tests: same request, delivered to the mock's socket; Host header unchanged.
            let mut parts = uri.into_parts();
            parts.scheme = Some(http::uri::Scheme::HTTP);
            parts.authority = Some(addr.to_string().parse().expect("socket address is an authority"));
            *request.uri_mut() = http::Uri::from_parts(parts).expect("rebuilt from a valid uri");
        }
        Box::new(async move {
            let sent = Arc::new(AtomicBool::new(false));
            let request = request.map(|body| SentFlag { inner: body, sent: sent.clone() }.boxed_unsync());
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            if !sent.load(Ordering::Acquire) {
                // The guest may still be writing its request body while it does not
                // read the response: the connection must go on by itself.
                return Ok((response.map(BodyExt::boxed_unsync), Box::new(io) as IoFuture));
            }
            // Request sent: from here the connection only serves the response body,
            // so the body's reader drives it (no task hand-off per chunk).
            let response = response
                .map(|body| ConnBody { inner: body, io: Some(Pin::from(Box::new(io) as IoFuture)) }.boxed_unsync());
            Ok((response, Box::new(async { Ok(()) }) as IoFuture))
        })
    }
}

/// A request body that records when it has been sent whole.
struct SentFlag<B> {
    inner: B,
    sent: Arc<AtomicBool>,
}

impl<B: Body<Data = Bytes, Error = Error> + Unpin> Body for SentFlag<B> {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            self.sent.store(true, Ordering::Release);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            self.sent.store(true, Ordering::Release);
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for SentFlag<B> {
    fn drop(&mut self) {
        // The connection let go of the body: it will write nothing more of it.
        self.sent.store(true, Ordering::Release);
    }
}

/// A response body that drives its own connection when it is read.
struct ConnBody<B> {
    inner: B,
    io: Option<Pin<IoFuture>>,
}

impl<B: Body<Data = Bytes, Error = Error> + Unpin> Body for ConnBody<B> {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if let Some(io) = self.io.as_mut() {
            // A failed connection also fails the body, which reports it.
            if io.as_mut().poll(cx).is_ready() {
                self.io = None;
            }
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
