//! Trace reads and lists, and the gateway list.

use super::*;

#[test]
fn trace_reads_follow_the_role_rule_and_return_ordered_decoded_steps() {
    let w = World::new();
    let admin = w.login("admin@acme.test");
    let r = w.get("/playground/trace/trc_acme_main_3", &admin);
    assert_eq!(r.status, 200, "{}", r.body);
    let v = json_of(&r);
    assert_eq!(v["trace"]["id"], "trc_acme_main_3");
    assert_eq!(v["trace"]["gateway_id"], "gw_acme_main");
    assert_eq!(v["trace"]["tenant_slug"], "acme");
    assert_eq!(v["trace"]["gateway_slug"], "main");
    assert_eq!(v["trace"]["status"], "error");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 12);
    assert_eq!(steps[0]["name"], "request.received");
    assert_eq!(steps[11]["name"], "response.done");
    assert!(steps.iter().all(|s| s["data"].is_object()), "data decoded inline");
    let starts: Vec<i64> = steps.iter().map(|s| s["started_at"].as_i64().unwrap()).collect();
    assert!(starts.windows(2).all(|p| p[0] < p[1]), "in step order");
    assert_eq!(w.get("/traces/trc_acme_main_3", &admin).body, r.body, "the alias answers the same");

    let scoped = w.login("scoped-admin@acme.test");
    assert_error(&w.get("/traces/trc_acme_main_1", &scoped), 404, "trace_not_found");
    assert_eq!(w.get("/traces/trc_acme_second_1", &scoped).status, 200);
    assert_error(&w.get("/traces/trc_acme_main_1", &w.login("member@acme.test")), 403, "insufficient_role");
    assert_error(&w.get("/traces/trc_acme_main_1", &w.login("viewer@acme.test")), 403, "insufficient_role");
    let euco = w.login("admin@euco.test");
    assert_error(&w.get("/traces/trc_acme_main_1", &euco), 404, "trace_not_found");
    assert_eq!(
        w.get("/traces/trc_acme_main_1", &euco).body,
        w.get("/traces/trc_nope", &euco).body,
        "no existence leak"
    );
    assert_eq!(w.get("/traces/trc_acme_main_1", &w.login("platform@demo.test")).status, 200);
    assert_error(&w.get("/traces/x'%20OR%201=1", &admin), 400, "invalid_trace_id");

    // Every demo gateway has a few traces of 3-12 steps.
    let platform = w.login("platform@demo.test");
    for gw in
        ["gw_acme_main", "gw_acme_nokey", "gw_acme_second", "gw_euco_eu-linkup", "gw_euco_eu-brave", "gw_frozen_main"]
    {
        let list = json_of(&w.get(&format!("/playground/traces?gateway_id={gw}"), &platform));
        let ids: Vec<String> =
            list["traces"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect();
        assert!(ids.len() >= 2, "{gw}");
        for id in ids {
            let n = json_of(&w.get(&format!("/traces/{id}"), &platform))["steps"].as_array().unwrap().len();
            assert!((3..=12).contains(&n), "{id}: {n}");
        }
    }
}

#[test]
fn a_long_trace_reads_as_one_document_across_pages() {
    let w = World::new();
    let admin = w.login("admin@acme.test");
    let steps = 3 * traces::PAGE + 7;
    w.db.exec(
        "INSERT INTO traces (id, gateway_id, started_at, model, status) VALUES ('trc_long', 'gw_acme_main', 1, 'm', 'ok')",
        &[],
    )
    .unwrap();
    for seq in 0..steps {
        // ~300 bytes a step: more than trace_pages::WRITE_AT in all, so the trace is streamed.
        let data = if seq % 3 == 0 {
            format!("{{\"b\":\"{}\",\"a\":[1.0]}}", "x".repeat(250))
        } else {
            format!("{{\"seq\":\"{}\"}}", "y".repeat(250))
        };
        w.db.exec(
            "INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data) VALUES ('trc_long', ?, 'llm.call', ?, ?, ?)",
            &[seq.into(), seq.into(), (seq + 1).into(), data.as_str().into()],
        )
        .unwrap();
    }
    // As the handler gets it: the first pages as the body, the rest as a stream.
    let undrained = |path: &str| {
        let req = Request {
            method: "GET".into(),
            path: path.into(),
            query: String::new(),
            headers: vec![("authorization".into(), format!("Bearer {admin}"))],
            body: Body::Bytes(Vec::new()),
        };
        handle(&w.ctx(), &req)
    };
    let first = undrained("/traces/trc_long");
    assert_eq!(first.status, 200);
    assert!(first.stream.is_some(), "more than a page: the rest is streamed");
    assert!(first.body.starts_with("{\"steps\":[{\"data\":{\"a\":[1.0],\"b\":\"xxx"), "{}", &first.body[..60]);
    assert!(first.body.len() >= trace_pages::WRITE_AT, "the head leaves with a full first write");
    let r = w.get("/traces/trc_long", &admin);
    assert_eq!(r.body, traces::tests::reference_body(&w.db, "trc_long"));
    assert_eq!(json_of(&r)["trace"]["step_count"], steps);
    // A short trace is one body, nothing streamed.
    let short = undrained("/traces/trc_acme_main_3");
    assert!(short.stream.is_none());
    assert_eq!(short.body, traces::tests::reference_body(&w.db, "trc_acme_main_3"));
}

#[test]
fn trace_lists_are_recent_first_and_limited() {
    let w = World::new();
    let admin = w.login("admin@acme.test");
    let r = w.get("/playground/traces?gateway_id=gw_acme_main", &admin);
    assert_eq!(r.status, 200, "{}", r.body);
    let list = json_of(&r)["traces"].as_array().unwrap().clone();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0]["id"], "trc_acme_main_3");
    assert_eq!(list[0].as_object().unwrap().keys().collect::<Vec<_>>(), vec!["id", "model", "started_at", "status"]);
    for t in &list {
        assert!(
            t["id"].is_string() && t["started_at"].is_i64() && t["model"].is_string() && t["status"].is_string(),
            "{t}"
        );
    }
    let r = w.get("/playground/traces?gateway_id=gw_acme_main&limit=1", &admin);
    assert_eq!(json_of(&r)["traces"].as_array().unwrap().len(), 1);
    assert_error(&w.get("/playground/traces?gateway_id=gw_acme_main&limit=0", &admin), 400, "invalid_limit");
    assert_error(&w.get("/playground/traces?gateway_id=gw_acme_main&limit=101", &admin), 400, "invalid_limit");
    assert_error(&w.get("/playground/traces", &admin), 400, "invalid_gateway_id");
    assert_error(&w.get("/playground/traces?gateway_id=gw_euco_eu-linkup", &admin), 404, "gateway_not_found");
    assert_error(
        &w.get("/playground/traces?gateway_id=gw_acme_main", &w.login("member@acme.test")),
        403,
        "insufficient_role",
    );
}

#[test]
fn gateway_lists_show_only_accessible_gateways_and_never_a_key() {
    let w = World::new();
    let ids = |email: &str| -> Vec<String> {
        let r = w.get("/gateways", &w.login(email));
        assert_eq!(r.status, 200);
        json_of(&r)["gateways"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids("platform@demo.test").len(), 6);
    assert_eq!(ids("admin@acme.test"), vec!["gw_acme_main", "gw_acme_nokey", "gw_acme_second"]);
    assert_eq!(ids("scoped-admin@acme.test"), vec!["gw_acme_second"]);
    assert_eq!(ids("viewer@acme.test").len(), 3);
    assert_eq!(ids("admin@euco.test"), vec!["gw_euco_eu-brave", "gw_euco_eu-linkup"]);
    let r = w.get("/gateways", &w.login("admin@euco.test"));
    let first = &json_of(&r)["gateways"][0];
    assert_eq!(
        first,
        &json!({ "id": "gw_euco_eu-brave", "slug": "eu-brave", "tenant_slug": "euco", "playground_enabled": true, "eu_region_routing": true, "web_search": { "provider": "brave" } })
    );
}
