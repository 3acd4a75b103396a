//! `static/openapi.yaml`: served by the static-files component as
//! `application/yaml` with the hardened headers, and complete: every operation
//! it lists answers through the real components (the conformance proxy of
//! `component_tests::client` checks each answer against the document).

use component_tests::*;

async fn app() -> TestApp {
    for wasm in ["static_files.wasm", "debug_api.wasm", "playground.wasm", "simulator.wasm"] {
        require_wasm(wasm);
    }
    TestApp::start(TestAppOptions::new(repo_root().join("spin.toml"))).await.expect("spin.toml boots")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_document_is_served_as_yaml_with_the_hardened_headers() {
    let app = app().await;
    let response = client().get(app.url("/openapi.yaml")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(header("content-type").as_deref(), Some("application/yaml"));
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    assert_eq!(header("referrer-policy").as_deref(), Some("no-referrer"));
    assert_eq!(header("cache-control").as_deref(), Some("no-cache"));
    assert!(header("etag").is_some());
    let body = response.bytes().await.unwrap();
    assert_eq!(body.as_ref(), std::fs::read(repo_root().join("static/openapi.yaml")).unwrap());
    let doc: serde_json::Value = serde_norway::from_slice(&body).unwrap();
    assert_eq!(doc["openapi"], "3.2.0");
}

/// One request per documented operation (no credentials, empty JSON body):
/// each answer must be one the document lists for it, so an operation the
/// components do not answer, or answer otherwise, fails here.
#[tokio::test(flavor = "multi_thread")]
async fn every_documented_operation_answers_as_documented() {
    let app = app().await;
    let doc = openapi::document();
    let mut seen = 0;
    for (template, item) in doc.root["paths"].as_object().unwrap() {
        for method in ["get", "post"] {
            if item.get(method).is_none() {
                continue;
            }
            let path =
                template.split('/').map(|s| if s.starts_with('{') { "x_1" } else { s }).collect::<Vec<_>>().join("/");
            let url = app.url(&format!("{path}?agent_id=sindra&gateway_id=gw_1&q=x"));
            let request = match method {
                "get" => client().get(url),
                _ => client().post(url).header("content-type", "application/json").body("{}"),
            };
            let response = request.send().await.unwrap();
            // 599 is the conformance proxy's verdict on an answer the document does not allow.
            assert_ne!(response.status().as_u16(), 599, "{method} {path}: {}", response.text().await.unwrap());
            seen += 1;
        }
    }
    assert_eq!(seen, 22, "operations in static/openapi.yaml");
}
