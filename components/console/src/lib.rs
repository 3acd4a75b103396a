//! The operator console as one portable `wasi:http/incoming-handler`
//! component that imports only `wasi:*`: the site, built in at compile time
//! with its precompressed variants, and the console API below `/api`,
//! configured from the environment (`console_api::env`). The same libraries
//! as the Spin components, without Spin's router, variables or key-value.

#[cfg(target_arch = "wasm32")]
mod portable {
    use console_api::env::Environment;
    use console_api::Platform;
    use spin_sdk::http::{IncomingRequest, ResponseOutparam};
    use spin_sdk::http_component;

    static SITE: static_core::Embedded = include!(concat!(env!("OUT_DIR"), "/site.rs"));

    #[http_component]
    fn handle(req: IncomingRequest, out: ResponseOutparam) {
        let platform = Environment;
        // No peer address here: no proxy is trusted, Host alone is checked.
        if !guest_http::host_allowed_by(&req, &platform.var("allowed_hosts").unwrap_or_default(), &[]) {
            return guest_http::send_host_not_allowed(out);
        }
        let path = guest_http::path(&req);
        match console_api::routes::below_api(&path) {
            Some(below) => console_api::serve(req, out, below, &platform),
            None => static_core::guest::handle(req, out, &SITE, None),
        }
    }
}
