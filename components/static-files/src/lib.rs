//! The site's static files (route `/...`). A thin shell: every decision is in
//! `static_core::serve`, the sending in `static_core::guest`; this file only
//! gives them Spin's mounts and `spin-path-info`.

use guest_http::{host_allowed, send_host_not_allowed, spin_header};
use spin_sdk::http::{IncomingRequest, ResponseOutparam};
use spin_sdk::http_component;
use static_core::Site;

#[http_component]
fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
    if !host_allowed(&request) {
        return send_host_not_allowed(response_out);
    }
    let path_info = spin_header(&request, "spin-path-info");
    static_core::guest::handle(request, response_out, &Site::spin_mounts(), path_info.as_deref());
}
