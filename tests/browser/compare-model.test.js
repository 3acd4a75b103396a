'use strict';
// The pure models of static/js/compare.js and static/js/otlp.js in Node, without a
// browser: the modules imported as they are (copied beside a package.json that makes
// them ES modules; Node 20 would read a bare .js as CommonJS).

const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { MODULES_DIR, REPO_ROOT } = require('./lib/harness');

let compare;
let otlp;
before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-modules-'));
  for (const name of fs.readdirSync(MODULES_DIR)) fs.copyFileSync(path.join(MODULES_DIR, name), path.join(dir, name));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
  compare = await import(pathToFileURL(path.join(dir, 'compare.js')));
  otlp = await import(pathToFileURL(path.join(dir, 'otlp.js')));
});

const join = (runs, ops) => runs.filter((r) => ops.includes(r.op)).map((r) => r.text).join('');

test('wordDiff: runs that rebuild both texts; changed words only', () => {
  const a = 'It is sunny in Oslo today.';
  const b = 'It is rainy in Bergen today.';
  const runs = compare.wordDiff(a, b);
  assert.equal(join(runs, ['=', '-']), a);
  assert.equal(join(runs, ['=', '+']), b);
  assert.deepEqual(runs.filter((r) => r.op !== '=').map((r) => r.op + r.text), ['-sunny', '+rainy', '-Oslo', '+Bergen']);
  assert.deepEqual(compare.wordDiff('', ''), []);
  assert.deepEqual(compare.wordDiff('same words', 'same words'), [{ op: '=', text: 'same words' }]);
  // A large middle falls back to one replacement and still rebuilds both.
  const big = Array.from({ length: 3000 }, (_, i) => 'w' + i).join(' ');
  const big2 = Array.from({ length: 3000 }, (_, i) => 'v' + i).join(' ');
  const r2 = compare.wordDiff(big, big2);
  assert.equal(join(r2, ['=', '-']), big);
  assert.equal(join(r2, ['=', '+']), big2);
});

test('jsonDiff: leaf rows with paths, added / removed / changed, type changes', () => {
  const d = compare.jsonDiff({ q: 'weather', city: 'Oslo', units: 'metric', n: { a: [1, 2] } }, { q: 'weather', city: 'Bergen', days: 3, n: { a: [1] } });
  assert.deepEqual(d.rows.map((r) => [r.path, r.op]), [
    ['$.q', 'same'], ['$.city', 'changed'], ['$.units', 'removed'], ['$.n.a[0]', 'same'], ['$.n.a[1]', 'removed'], ['$.days', 'added']]);
  assert.equal(d.changed, 4);
  assert.deepEqual(compare.jsonDiff({ 'a b': 1 }, { 'a b': '1' }).rows, [{ path: '$["a b"]', op: 'changed', a: 1, b: '1' }]);
  assert.deepEqual(compare.jsonDiff(null, {}).rows.map((r) => r.op), ['changed']);
  assert.equal(compare.jsonDiff({}, {}).changed, 0);
});

test('otlp: a session document round-trips with content; without it, no text, reasoning, arguments or output', () => {
  const ev = (event, data, ms) => ({ event, data, server_ms: ms, browser_ms: ms + 0.5 });
  const done = { turn_id: 't1', usage: { input_tokens: 3, output_tokens: 4 }, finish_reason: 'stop' };
  const doc = {
    format: 'ratatoskr-session', version: 1, exported_at: '2026-11-01T10:00:00.000Z', agent: { agent_id: 'a', display_name: null },
    session_id: 's_1', bifrost_visible_host: null, started_at: '2026-11-01T09:59:00.000Z', stall_ms: 10000,
    turns: [{ index: 1, user_text: 'secret prompt', started_at: '2026-11-01T09:59:01.000Z', server_t0: null, first_byte_ms: 2,
      events: [ev('turn.started', { turn_id: 't1' }, 3), ev('thinking', { delta: 'secret reasoning' }, 5), ev('tool_call', { call_id: 'c', name: 'lookup', arguments: { q: 'secret args' } }, 7),
        ev('tool_result', { call_id: 'c', name: 'lookup', output: 'secret output', is_error: true }, 9), ev('text', { delta: 'secret answer' }, 11), ev('done', done, 13)],
      terminal: { kind: 'done', origin: 'stream', data: done, browser_ms: 13.5 }, stalls: [{ from_ms: 1, to_ms: 2 }], affect_at_start: null }],
    tools: null, bifrost_snapshots: [], admin_events: [], affect_history: [],
  };
  const withContent = otlp.sessionToOtlp(doc, { content: true });
  assert.deepEqual(otlp.parseImportText(JSON.stringify(withContent)), doc);
  const bare = JSON.stringify(otlp.sessionToOtlp(doc, { content: false }));
  assert.doesNotMatch(bare, /secret/);
  const back = otlp.parseImportText(bare);
  assert.equal(back.turns[0].user_text, '');
  assert.deepEqual(back.turns[0].events.map((e) => e.event), doc.turns[0].events.map((e) => e.event));
  const spans = withContent.resourceSpans[0].scopeSpans[0].spans;
  assert.deepEqual(spans.map((s) => s.name), ['ratatoskr.session', 'invoke_agent a', 'execute_tool lookup']);
  assert.ok(spans.every((s) => /^[0-9a-f]{32}$/.test(s.traceId) && /^[0-9a-f]{16}$/.test(s.spanId)));
  assert.equal(spans[2].status.code, 2);
  assert.deepEqual(spans[1].events.map((e) => e.name).filter((n) => n !== 'ratatoskr.event'), ['ratatoskr.stall']);
});

test('otlp: the foreign GenAI fixture maps to turns and tool calls; refusals are typed', () => {
  const text = fs.readFileSync(path.join(REPO_ROOT, 'tests', 'browser', 'fixtures', 'otlp-genai-foreign.json'), 'utf8');
  const doc = otlp.parseImportText(text);
  assert.equal(doc.session_id, 'conv-42');
  assert.equal(doc.turns.length, 2);
  assert.deepEqual(doc.turns[0].events.map((e) => e.event), ['turn.started', 'tool_call', 'tool_result', 'done']);
  assert.deepEqual(doc.turns[0].events[1].data, { call_id: 'call_1', name: 'book_table', arguments: { party: 2, time: '19:00' } });
  const code = (t) => { try { otlp.parseImportText(t); } catch (e) { return e.code; } return 'accepted'; };
  assert.equal(code('{"resourceSpans": "x"}'), 'import_invalid_otlp');
  assert.equal(code(text.replace('4bf92f3577b34da6a3ce929d0e0e4736', 'nothex')), 'import_invalid_otlp');
  assert.equal(code(text.replace(/"gen_ai\.operation\.name", "value": \{ "stringValue": "(chat|execute_tool)" \}/g, '"http.method", "value": { "stringValue": "GET" }')), 'import_no_genai_spans');
  assert.equal(code('{"hello": 1}'), 'import_wrong_format');
  assert.equal(code('nope'), 'import_invalid_json');
});
