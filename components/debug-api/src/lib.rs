//! The console's server routes (`/api/...`) as a Spin component: the
//! `console-api` library with Spin's variables, its key-value store `default`
//! (the durable affect history) and its `allowed_outbound_hosts`, which Spin
//! enforces itself. The path below `/api` is Spin's `spin-path-info`.

#[cfg(target_arch = "wasm32")]
mod spin {
    use console_api::Platform;
    use guest_http::kv::{KvError, SpinKv};
    use spin_sdk::http::{IncomingRequest, ResponseOutparam};
    use spin_sdk::{http_component, variables};

    struct Spin;

    impl Platform for Spin {
        type Store = SpinKv;

        fn var(&self, name: &str) -> Option<String> {
            variables::get(name).ok()
        }

        fn store(&self) -> Result<SpinKv, KvError> {
            SpinKv::open_default()
        }

        fn trusted_proxies(&self) -> Vec<guest_http::forwarded::Cidr> {
            guest_http::forwarded::trusted_or_none(&self.var("trusted_proxies").unwrap_or_default())
        }

        fn may_call(&self, _https: bool, _authority: &str) -> bool {
            true
        }
    }

    #[http_component]
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        if !guest_http::host_allowed(&req) {
            return guest_http::send_host_not_allowed(out);
        }
        let path = guest_http::spin_header(&req, "spin-path-info").unwrap_or_default();
        console_api::serve(req, out, &path, &Spin);
    }
}
