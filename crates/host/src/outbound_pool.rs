//! Upstream connections kept alive between requests, as Spin's outbound client
//! keeps them (hyper-util's pool: per scheme and authority, the most recent
//! idle connection first, 90 s idle at most; runtime config
//! `[outbound_http] connection_pooling = false` turns it off).
//!
//! Unlike a client that runs each connection on a task of its own, a
//! connection here is driven by whoever waits on it: the sender until the
//! response head, then the response body's reader, so a streamed body crosses
//! no task per chunk. The body hands its connection back when it has been
//! read to the end; a body dropped early closes it.

use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::Scheme;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// hyper-util's default idle timeout, which Spin keeps.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// wasmtime's default for every timeout a guest leaves unset.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

pub type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;

trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static> Stream for T {}

type Connection = http1::Connection<TokioIo<Box<dyn Stream>>, WasiBody>;

/// Where a connection goes: TLS or not, and `host:port`.
type Key = (bool, String);

/// One HTTP/1.1 connection: its request sender and the future that does its I/O.
struct Upstream {
    sender: http1::SendRequest<WasiBody>,
    conn: Pin<Box<Connection>>,
}

impl Upstream {
    /// Whether the connection can take a request now, polling it once without
    /// waiting: a peer that closed it, or a connection still busy, is not.
    fn ready_now(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        if self.conn.as_mut().poll(&mut cx).is_ready() {
            return false;
        }
        matches!(self.sender.poll_ready(&mut cx), Poll::Ready(Ok(())))
    }
}

struct Idle {
    upstream: Upstream,
    since: Instant,
}

pub struct Pool {
    enabled: bool,
    idle: Mutex<HashMap<Key, Vec<Idle>>>,
}

impl Pool {
    pub fn new(enabled: bool) -> Arc<Self> {
        Arc::new(Self { enabled, idle: Mutex::new(HashMap::new()) })
    }

    /// Idle connections held now (tests).
    pub fn idle_count(&self) -> usize {
        self.idle.lock().expect("pool lock").values().map(Vec::len).sum()
    }

    fn checkout(&self, key: &Key) -> Option<Upstream> {
        if !self.enabled {
            return None;
        }
        let mut idle = self.idle.lock().expect("pool lock");
        let list = idle.get_mut(key)?;
        while let Some(entry) = list.pop() {
            let mut upstream = entry.upstream;
            if entry.since.elapsed() < IDLE_TIMEOUT && upstream.ready_now() {
                return Some(upstream);
            }
        }
        None
    }

    fn checkin(&self, key: Key, upstream: Upstream) {
        if !self.enabled {
            return;
        }
        let mut idle = self.idle.lock().expect("pool lock");
        // Expired connections of every authority go here: nothing else wakes them.
        idle.retain(|_, list| {
            list.retain(|entry| entry.since.elapsed() < IDLE_TIMEOUT);
            !list.is_empty()
        });
        idle.entry(key).or_default().push(Idle { upstream, since: Instant::now() });
    }

    /// Sends a request whose URI is absolute (`scheme://authority/path`), on an
    /// idle connection to that authority or a new one.
    pub async fn send(
        self: Arc<Self>,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
        let timeout =
            |pick: fn(&RequestOptions) -> Option<Duration>| options.and_then(|o| pick(&o)).unwrap_or(DEFAULT_TIMEOUT);
        let connect_timeout = timeout(|o| o.connect_timeout);
        let first_byte_timeout = timeout(|o| o.first_byte_timeout);
        let between_bytes_timeout = timeout(|o| o.between_bytes_timeout).max(Duration::from_nanos(1));

        let (key, mut request) = origin_form(request)?;
        let sent = Arc::new(AtomicBool::new(false));
        request = request.map(|body| SentFlag { inner: body, sent: sent.clone() }.boxed_unsync());

        let (response, upstream) = loop {
            let (mut upstream, reused) = match self.checkout(&key) {
                Some(upstream) => (upstream, true),
                None => (connect(&key, connect_timeout).await?, false),
            };
            let response = tokio::time::timeout(first_byte_timeout, send_driving(&mut upstream, request))
                .await
                .map_err(|_| Error::ConnectionReadTimeout)?;
            match response {
                Ok(response) => break (response, upstream),
                // A kept connection the peer closed meanwhile: the request never
                // left, so it goes out again on a new one (hyper-util does the same).
                Err(mut e) if reused && e.message().is_some() => {
                    request = e.take_message().expect("checked above");
                }
                Err(e) => return Err(e.into_error().into()),
            }
        };

        let response = response.map(|incoming| Timed::new(incoming, between_bytes_timeout));
        if !sent.load(Ordering::Acquire) {
            // The guest may still be writing its request body while it does not
            // read the response: the connection must go on by itself (and close
            // after, since its sender is dropped).
            let Upstream { sender, conn } = upstream;
            drop(sender);
            let io = async move { conn.await.map_err(Error::from) };
            return Ok((response.map(BodyExt::boxed_unsync), Box::new(io)));
        }
        let response = response
            .map(|inner| PooledBody { inner, upstream: Some(upstream), pool: self.clone(), key }.boxed_unsync());
        Ok((response, Box::new(async { Ok(()) })))
    }
}

/// The pool key, and the request with its URI in origin form (`/path?query`),
/// which is what HTTP/1.1 sends to a server that is not a proxy.
fn origin_form(mut request: http::Request<WasiBody>) -> Result<(Key, http::Request<WasiBody>), Error> {
    let uri = request.uri();
    let tls = uri.scheme() == Some(&Scheme::HTTPS);
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let authority = match authority.port() {
        Some(_) => authority.to_string(),
        None => format!("{authority}:{}", if tls { 443 } else { 80 }),
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = http::Uri::builder().path_and_query(path).build().map_err(|_| Error::HttpRequestUriInvalid)?;
    Ok(((tls, authority), request))
}

async fn connect((tls, authority): &Key, timeout: Duration) -> Result<Upstream, Error> {
    let connecting = async {
        let tcp = TcpStream::connect(authority.as_str()).await.map_err(Error::Connect)?;
        let io: Box<dyn Stream> = if *tls { Box::new(tls_connect(authority, tcp).await?) } else { Box::new(tcp) };
        let (sender, conn) = http1::handshake(TokioIo::new(io)).await?;
        Ok(Upstream { sender, conn: Box::pin(conn) })
    };
    tokio::time::timeout(timeout, connecting).await.map_err(|_| Error::ConnectionTimeout)?
}

/// TLS to the authority's name (or IP literal), checked against the Mozilla roots,
/// as wasmtime's default client and Spin do.
async fn tls_connect(authority: &str, tcp: TcpStream) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Error> {
    use rustls::pki_types::ServerName;
    static CONFIG: std::sync::OnceLock<Arc<rustls::ClientConfig>> = std::sync::OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.into() };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    });
    let name = match authority.parse::<std::net::SocketAddr>() {
        Ok(addr) => ServerName::from(addr.ip()),
        Err(_) => {
            let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host);
            ServerName::try_from(host.to_string())?
        }
    };
    tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp).await.map_err(Error::Tls)
}

/// Sends the request and drives the connection until the response head arrives.
async fn send_driving(
    upstream: &mut Upstream,
    request: http::Request<WasiBody>,
) -> Result<http::Response<Incoming>, hyper::client::conn::TrySendError<http::Request<WasiBody>>> {
    let mut response = std::pin::pin!(upstream.sender.try_send_request(request));
    let mut conn_done = false;
    poll_fn(|cx| {
        if let Poll::Ready(result) = response.as_mut().poll(cx) {
            return Poll::Ready(result);
        }
        // A connection that ended (closed or failed) settles the response
        // future with its error; poll it no more.
        if !conn_done && upstream.conn.as_mut().poll(cx).is_ready() {
            conn_done = true;
            return response.as_mut().poll(cx);
        }
        Poll::Pending
    })
    .await
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

/// The response body with the guest's between-bytes timeout, and wasmtime's
/// error mapping.
struct Timed {
    incoming: Incoming,
    limit: Duration,
    timer: Pin<Box<Sleep>>,
}

impl Timed {
    fn new(incoming: Incoming, limit: Duration) -> Self {
        Self { incoming, limit, timer: Box::pin(tokio::time::sleep(limit)) }
    }
}

impl Body for Timed {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let deadline = tokio::time::Instant::now() + self.limit;
                self.timer.as_mut().reset(deadline);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) if e.is_timeout() => Poll::Ready(Some(Err(Error::HttpResponseTimeout))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

/// A response body that drives its own connection when it is read, and
/// returns it to the pool once read to the end.
struct PooledBody {
    inner: Timed,
    upstream: Option<Upstream>,
    pool: Arc<Pool>,
    key: Key,
}

impl PooledBody {
    fn release(&mut self) {
        if let Some(upstream) = self.upstream.take() {
            self.pool.checkin(self.key.clone(), upstream);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if let Some(upstream) = self.upstream.as_mut() {
            // A connection that ended can serve nothing more; a failed one also
            // fails the body, which reports it.
            if upstream.conn.as_mut().poll(cx).is_ready() {
                self.upstream = None;
            }
        }
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = frame {
            self.release();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        // Read whole without the final poll (a sized body): still reusable.
        // Dropped mid-body: the connection closes with it.
        if self.inner.is_end_stream() {
            self.release();
        }
    }
}
