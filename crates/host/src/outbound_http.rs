//! The `wasi:http/outgoing-handler` hook: where the allow-list is enforced,
//! `*.spin.internal` is served in-process (service chaining), tests
//! redirect named hosts to their mock upstreams, and everything else goes out
//! through the connection pool ([`crate::outbound_pool`]).

use std::future::Future;
use std::sync::Arc;

use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::app::{AppInner, ComponentConfig};
use crate::outbound::{default_port, Target};
use crate::outbound_pool::IoFuture;
use crate::routing::RouteMatch;

const CHAINING_SUFFIX: &str = ".spin.internal";

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
        Box::new(self.app.upstreams.clone().send(request, options))
    }
}
