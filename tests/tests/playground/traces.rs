//! A long trace streamed in bounded memory, a broken one aborted (what a
//! read answers: `api_tests::trace_reads`).

use super::*;

/// Writes trace `id` of `steps` steps into the app's database file in one
/// statement, with every kind of stored `data` the read must re-emit as it
/// did before streaming: canonical JSON (copied through), unsorted keys,
/// whitespace, text that is not JSON, `\u` escapes, floats, duplicate keys.
fn write_long_trace(p: &Playground, id: &str, steps: usize) {
    p.sql(&format!(
        "INSERT INTO traces (id, gateway_id, started_at, ended_at, model, status)
         VALUES ('{id}', 'gw_acme_main', 1796000000000, NULL, 'ratatoskr-large', 'ok')"
    ));
    let data = r#"CASE i % 12
        WHEN 0 THEN '{"model":"ratatoskr-large","output":"A streamed chunk.","tokens":' || i || '}'
        WHEN 1 THEN '{"tokens":1,"model":"unsorted"}'
        WHEN 2 THEN '{ "a" : [ 1 , 2 ] }'
        WHEN 3 THEN 'not json at all'
        WHEN 4 THEN '{"u":"\u00e5\ud83d\ude00 å ✓"}'
        WHEN 5 THEN '[1.0,1e5,-0,0.5,12345678901234567890]'
        WHEN 6 THEN '{"a":1,"a":2}'
        WHEN 7 THEN '"a \/ b"'
        WHEN 8 THEN ''
        WHEN 9 THEN '{"q":"\"quoted\" \\ \n"}'
        WHEN 10 THEN '42'
        ELSE '{"seq":' || i || '}' END"#;
    p.sql(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < {steps})
         INSERT INTO trace_steps (trace_id, seq, name, started_at, ended_at, data)
         SELECT '{id}', i, CASE i % 3 WHEN 0 THEN 'llm.call' WHEN 1 THEN 'tool \"q\"' || char(10) ELSE 'résumé' END,
                1796000000000 + i * 15, CASE WHEN i % 5 = 0 THEN NULL ELSE 1796000000012 + i * 15 END, {data}
           FROM n"
    ));
}

/// The body as the playground built it before streaming, from the rows the
/// test wrote: one `Value` (data decoded, or kept as a string), serialized once.
fn trace_body_as_before(p: &Playground, id: &str) -> String {
    let opt_int = |v: &SqlValue| match v {
        SqlValue::Null => Value::Null,
        v => json!(int(v)),
    };
    let tr = p.sql(&format!(
        "SELECT tr.id, tr.gateway_id, tr.started_at, tr.ended_at, tr.model, tr.status, g.slug, t.slug
           FROM traces tr JOIN gateways g ON g.id = tr.gateway_id JOIN tenants t ON t.id = g.tenant_id
          WHERE tr.id = '{id}'"
    ));
    let tr = &tr[0];
    let steps: Vec<Value> = p
        .sql(&format!("SELECT name, started_at, ended_at, data FROM trace_steps WHERE trace_id = '{id}' ORDER BY seq"))
        .iter()
        .map(|r| {
            let data = text(&r[3]);
            json!({
                "name": text(&r[0]),
                "started_at": opt_int(&r[1]),
                "ended_at": opt_int(&r[2]),
                "data": serde_json::from_str::<Value>(&data).unwrap_or(Value::String(data)),
            })
        })
        .collect();
    let trace = json!({
        "id": text(&tr[0]),
        "gateway_id": text(&tr[1]),
        "tenant_slug": text(&tr[7]),
        "gateway_slug": text(&tr[6]),
        "started_at": opt_int(&tr[2]),
        "ended_at": opt_int(&tr[3]),
        "model": text(&tr[4]),
        "status": text(&tr[5]),
        "step_count": steps.len(),
    });
    json!({ "trace": trace, "steps": steps }).to_string()
}

#[track_caller]
fn assert_same_bytes(got: &str, want: &str) {
    if got != want {
        let at = got.bytes().zip(want.bytes()).take_while(|(a, b)| a == b).count();
        let around = |s: &str| s.get(at.saturating_sub(80)..(at + 80).min(s.len())).unwrap_or("").to_string();
        panic!(
            "bodies differ at byte {at} (lengths {} / {}):\n got: {}\nwant: {}",
            got.len(),
            want.len(),
            around(got),
            around(want)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_trace_streams_the_bytes_it_read_as_before_in_bounded_memory() {
    let p = Playground::start("longtrace").await;
    let token = p.login("admin@acme.test").await;
    write_long_trace(&p, "trc_long_1k", 1_000);
    write_long_trace(&p, "trc_long_100k", 100_000);
    let host = Runtime::selected() == Runtime::Host;
    if host {
        // The sign-in's argon2 hash grew that instance to ~20 MiB: not a trace read's.
        p.app.host().take_memory_peak("playground");
    }
    let small = p.get("/traces/trc_long_1k", Some(&token)).await;
    small.assert(200, "");
    assert_same_bytes(&small.body, &trace_body_as_before(&p, "trc_long_1k"));
    let peak_1k = if host { p.app.host().take_memory_peak("playground").unwrap() } else { 0 };
    let large = p.get("/traces/trc_long_100k", Some(&token)).await;
    large.assert(200, "");
    assert_eq!(large.header("content-type").as_deref(), Some("application/json; charset=utf-8"));
    assert_eq!(large.header("cache-control").as_deref(), Some("no-store"));
    assert_same_bytes(&large.body, &trace_body_as_before(&p, "trc_long_100k"));
    assert!(large.body.len() > 10_000_000, "{}", large.body.len());
    if host_only("peak guest memory is read from the repo's host") {
        return;
    }
    let peak_100k = p.app.host().take_memory_peak("playground").unwrap();
    eprintln!("peak guest memory: 1,000 steps {peak_1k} B, 100,000 steps {peak_100k} B");
    // Before streaming: 3.3 MiB and 230 MiB (the whole trace as rows, values and one body).
    assert!(peak_1k > 0 && peak_1k < 4 << 20, "{peak_1k}");
    assert!(peak_100k <= 2 * peak_1k, "100 times the steps, at most twice the memory: {peak_100k} vs {peak_1k}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trace_that_fails_after_its_head_is_aborted_never_cut_short() {
    let p = Playground::start("aborted").await;
    let token = p.login("admin@acme.test").await;
    write_long_trace(&p, "trc_broken", 20_000);
    // A step the reader cannot take (a blob as data), far past the first write.
    p.sql("UPDATE trace_steps SET data = x'00ff' WHERE trace_id = 'trc_broken' AND seq = 15000");
    // Straight to the app: the conformance proxy would answer a broken body with its own 502.
    let response =
        reqwest::Client::new().get(p.app.url("/admin/v1/traces/trc_broken")).bearer_auth(&token).send().await.unwrap();
    assert_eq!(response.status(), 200, "the head left before the failure");
    let body = response.bytes().await;
    assert!(body.is_err(), "the body is aborted, not ended: got {} bytes", body.map(|b| b.len()).unwrap_or(0));
    // The same failure within the first write is still a typed 500.
    write_long_trace(&p, "trc_early", 20_000);
    p.sql("UPDATE trace_steps SET data = x'00ff' WHERE trace_id = 'trc_early' AND seq = 3");
    p.get("/traces/trc_early", Some(&token)).await.assert(500, "storage_error");
}
