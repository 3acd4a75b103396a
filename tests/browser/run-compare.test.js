'use strict';
// The run comparison's pure model (static/js/run-compare.js, docs/rerun.md) in Node,
// without a browser: what a re-run sends or why it refuses, token Jaccard, the word
// diff's size, tool calls matched by name (changed arguments by path, removed, added,
// a renamed call), ok→error, finish, usage and timing deltas, the totals, and the
// export against docs/rerun-comparison.schema.json (Python's jsonschema, Draft 2020-12).

const { test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');
const { MODULES_DIR, REPO_ROOT } = require('./lib/harness');

const SCHEMA = path.join(REPO_ROOT, 'docs', 'rerun-comparison.schema.json');

let rc;
before(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-modules-'));
  for (const name of fs.readdirSync(MODULES_DIR)) fs.copyFileSync(path.join(MODULES_DIR, name), path.join(dir, name));
  fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}');
  rc = await import(pathToFileURL(path.join(dir, 'run-compare.js')));
});

/**
 * A turn from a compact script: [ms, event, data] (turn.started at 1 ms is added),
 * ending with its terminal.
 */
function turn(index, text, script) {
  const events = [{ event: 'turn.started', data: { turn_id: 't' + index }, server_ms: null, browser_ms: 1 }]
    .concat(script.map(([ms, event, data]) => ({ event, data, server_ms: null, browser_ms: ms })));
  const last = events[events.length - 1];
  return {
    index, user_text: text, started_at: '2026-11-03T10:00:0' + index + '.000Z', server_t0: null, first_byte_ms: 2, events,
    terminal: { kind: last.event, origin: 'stream', data: last.data, browser_ms: last.browser_ms }, stalls: [],
  };
}

const doc = (sessionId, agentId, turns) => ({
  format: 'ratatoskr-session', version: 1, exported_at: '2026-11-03T10:01:00.000Z', agent: { agent_id: agentId, display_name: 'Agent ' + agentId },
  session_id: sessionId, bifrost_visible_host: null, started_at: '2026-11-03T10:00:00.000Z', stall_ms: 10000, turns,
  tools: null, bifrost_snapshots: [], admin_events: [], affect_history: [],
});

const done = (input, output, reason = 'stop') => ({ usage: { input_tokens: input, output_tokens: output }, finish_reason: reason });
const call = (id, name, args) => ({ call_id: id, name, arguments: args });
const result = (id, name, isError = false) => ({ call_id: id, name, output: isError ? 'failed' : 'fine', is_error: isError });

const A = doc('s_a', 'v1', [
  turn(1, 'hello there', [[10, 'text', { delta: 'Hello! How can I help?' }], [20, 'done', done(5, 6)]]),
  turn(2, 'weather in Oslo', [
    [10, 'tool_call', call('a1', 'lookup', { q: 'weather', city: 'Oslo', units: 'metric' })], [30, 'tool_result', result('a1', 'lookup')],
    [40, 'text', { delta: 'It is sunny in Oslo.' }], [50, 'done', done(12, 7)]]),
  turn(3, 'plan a trip', [
    [10, 'tool_call', call('a2', 'lookup', { q: 'flights' })], [20, 'tool_result', result('a2', 'lookup')],
    [30, 'tool_call', call('a3', 'book', { seat: 'aisle' })], [40, 'tool_result', result('a3', 'book')],
    [50, 'text', { delta: 'Booked.' }], [60, 'done', done(20, 3)]]),
  turn(4, 'check the status', [
    [10, 'tool_call', call('a4', 'status', {})], [20, 'tool_result', result('a4', 'status')],
    [30, 'text', { delta: 'All green.' }], [40, 'done', done(8, 3)]]),
  turn(5, 'summarise', [[100, 'text', { delta: 'Short summary.' }], [150, 'done', done(10, 20)]]),
]);

const B = doc('s_b', 'v2', [
  turn(1, 'hello there', [[12, 'text', { delta: 'Hello! How can I help?' }], [25, 'done', done(5, 6)]]),
  turn(2, 'weather in Oslo', [
    [10, 'tool_call', call('b1', 'lookup', { q: 'weather', city: 'Oslo', units: 'imperial' })], [30, 'tool_result', result('b1', 'lookup')],
    [40, 'text', { delta: 'It is sunny in Oslo today.' }], [55, 'done', done(12, 8)]]),
  turn(3, 'plan a trip', [
    [10, 'tool_call', call('b2', 'lookup', { q: 'flights' })], [20, 'tool_result', result('b2', 'lookup')],
    [30, 'text', { delta: 'I found flights.' }], [40, 'done', done(20, 4)]]),
  turn(4, 'check the status', [[15, 'error', { code: 'upstream_failed', message: 'model overloaded' }]]),
  turn(5, 'summarise', [
    [20, 'tool_call', call('b3', 'calc', { expr: '2+2' })], [1220, 'tool_result', result('b3', 'calc')],
    [1600, 'text', { delta: 'A much longer summary.' }], [1650, 'done', done(10, 35, 'length')]]),
]);

test('rerunPlan: the recorded user texts in order; a recording without user text is refused with a typed code', () => {
  assert.deepEqual(rc.rerunPlan(A), { agent_id: 'v1', texts: ['hello there', 'weather in Oslo', 'plan a trip', 'check the status', 'summarise'] });
  const code = (d) => { try { rc.rerunPlan(d); } catch (e) { assert.ok(e instanceof rc.RerunRefused); return [e.code, e.message]; } return 'accepted'; };
  const bare = JSON.parse(JSON.stringify(A));
  for (const t of bare.turns) t.user_text = '';
  assert.equal(code(bare)[0], 'rerun_no_user_text');
  const some = JSON.parse(JSON.stringify(A));
  some.turns[1].user_text = '  ';
  some.turns[3].user_text = '';
  assert.deepEqual(code(some), ['rerun_missing_user_text', 'turns 2, 4 of the recording have no user text']);
  assert.equal(code(doc('s', 'v1', []))[0], 'rerun_no_turns');
});

test('tokenJaccard and wordDiffSize: the definitions, on known texts', () => {
  // {it, is, sunny, in, oslo} against the same plus {today}: 5 / 6.
  assert.equal(rc.tokenJaccard('It is sunny in Oslo.', 'It is sunny in Oslo today.'), 0.8333);
  assert.equal(rc.tokenJaccard('Same WORDS, same words!', 'same words'), 1, 'sets, lowercased, punctuation is not a token');
  assert.equal(rc.tokenJaccard('', ''), 1);
  assert.equal(rc.tokenJaccard('a', ''), 0);
  assert.equal(rc.tokenJaccard('Ærlig talt, 42', 'ærlig 42 år'), 0.5, 'Unicode letters and digits');
  assert.deepEqual(rc.wordDiffSize('It is sunny in Oslo.', 'It is sunny in Oslo today.'), { words_removed: 1, words_added: 2, words_changed: 3 });
  assert.deepEqual(rc.wordDiffSize('one two three', 'one two three'), { words_removed: 0, words_added: 0, words_changed: 0 });
});

test('toolChanges: matched by name in order; arguments by path; removed, added, and a renamed call paired as changed', () => {
  const f = (name, args, isError = false) => ({ call_id: name, name, arguments: args, result_size: 1, is_error: isError, duration_ms: 1 });
  const rows = rc.toolChanges(
    [f('lookup', { q: 'x', n: 1 }), f('book', { seat: 'aisle' }), f('pay', {}), f('mail', { to: 'a' })],
    [f('lookup', { q: 'y', n: 1, extra: true }), f('pay', {}, true), f('notify', { to: 'a' }), f('log', {})],
  );
  assert.deepEqual(rows.map((r) => [r.change, r.a && r.a.name, r.b && r.b.name, r.result_change]), [
    ['changed', 'lookup', 'lookup', 'same'],
    ['removed', 'book', null, null],
    ['same', 'pay', 'pay', 'ok_to_error'],
    ['changed', 'mail', 'notify', 'same'],
    ['added', null, 'log', null],
  ]);
  assert.deepEqual(rows[0].arguments, [{ path: '$.q', op: 'changed', a: 'x', b: 'y' }, { path: '$.extra', op: 'added', b: true }]);
  assert.equal(rows[3].name_changed, true);
  assert.deepEqual(rows[3].arguments, []);
  assert.deepEqual(rc.toolChanges([], []), []);
});

test('compareRuns: every row of a known recording against its re-run (changed argument, removed tool, error, slower turn with an added tool) and the totals', () => {
  const m = rc.compareRuns(A, B);
  assert.equal(m.rows.length, 5);
  const [r1, r2, r3, r4, r5] = m.rows;
  const brief = (r) => ({
    pair: r.pair, changed: r.changed, output: r.output, tools: r.tool_counts, status: r.status, ok_to_error: r.ok_to_error, finish: r.finish,
    usage: [r.usage.input_tokens.delta, r.usage.output_tokens.delta], timing: [r.timing.first_text_ms.delta, r.timing.total_ms.delta],
  });
  const none = { same: 0, changed: 0, added: 0, removed: 0 };
  assert.deepEqual(brief(r1), {
    pair: 'paired', changed: false, output: { words_removed: 0, words_added: 0, words_changed: 0, similarity: 1 }, tools: none,
    status: { a: 'done', b: 'done', change: 'same' }, ok_to_error: 0, finish: { a: 'stop', b: 'stop', same: true }, usage: [0, 0], timing: [2, 5],
  });
  assert.deepEqual(brief(r2), {
    pair: 'paired', changed: true, output: { words_removed: 1, words_added: 2, words_changed: 3, similarity: 0.8333 }, tools: { ...none, changed: 1 },
    status: { a: 'done', b: 'done', change: 'same' }, ok_to_error: 0, finish: { a: 'stop', b: 'stop', same: true }, usage: [0, 1], timing: [0, 5],
  });
  assert.deepEqual(r2.tools[0].arguments, [{ path: '$.units', op: 'changed', a: 'metric', b: 'imperial' }]);
  // "Booked." against "I found flights.": {booked} against {i, found, flights}.
  assert.deepEqual(brief(r3), {
    pair: 'paired', changed: true, output: { words_removed: 1, words_added: 3, words_changed: 4, similarity: 0 }, tools: { ...none, same: 1, removed: 1 },
    status: { a: 'done', b: 'done', change: 'same' }, ok_to_error: 0, finish: { a: 'stop', b: 'stop', same: true }, usage: [0, 1], timing: [-20, -20],
  });
  assert.deepEqual(r3.tools.map((t) => [t.change, t.a && t.a.name, t.b && t.b.name]), [['same', 'lookup', 'lookup'], ['removed', 'book', null]]);
  assert.deepEqual(brief(r4), {
    pair: 'paired', changed: true, output: { words_removed: 2, words_added: 0, words_changed: 2, similarity: 0 }, tools: { ...none, removed: 1 },
    status: { a: 'done', b: 'error', change: 'ok_to_error' }, ok_to_error: 1, finish: { a: 'stop', b: 'upstream_failed', same: false }, usage: [null, null], timing: [null, -25],
  });
  assert.deepEqual(brief(r5), {
    pair: 'paired', changed: true, output: { words_removed: 1, words_added: 3, words_changed: 4, similarity: 0.2 }, tools: { ...none, added: 1 },
    status: { a: 'done', b: 'done', change: 'same' }, ok_to_error: 0, finish: { a: 'stop', b: 'length', same: false }, usage: [0, 15], timing: [1500, 1500],
  });
  assert.deepEqual(r5.tools[0].b, { name: 'calc', call_id: 'b3', result: 'ok' });
  assert.deepEqual(m.totals, {
    turns_a: 5, turns_b: 5, paired: 5, not_run: 0, extra: 0, changed_turns: 4, words_changed: 13, similarity_mean: 0.4067,
    tools: { same: 1, changed: 1, added: 1, removed: 2 }, ok_to_error: 1, error_to_ok: 0, finish_changed: 2,
    usage: { input_tokens: { turns: 4, a: 47, b: 47, delta: 0 }, output_tokens: { turns: 4, a: 36, b: 53, delta: 17 } },
    timing: { total_ms: { turns: 5, a: 320, b: 1785, delta: 1465 }, first_text_ms_mean: { turns: 4, a: 50, b: 420.5, delta: 370.5 } },
  });
});

test('compareRuns: a re-run stopped after two turns: the rest are not run; a cut turn is running', () => {
  const cut = JSON.parse(JSON.stringify(B));
  cut.turns = cut.turns.slice(0, 2);
  cut.turns[1].terminal = null;
  cut.turns[1].events = cut.turns[1].events.slice(0, 3);
  const m = rc.compareRuns(A, cut);
  assert.deepEqual(m.rows.map((r) => [r.pair, r.status.a, r.status.b, r.status.change]), [
    ['paired', 'done', 'done', 'same'], ['paired', 'done', 'running', 'changed'],
    ['not_run', 'done', null, 'not_run'], ['not_run', 'done', null, 'not_run'], ['not_run', 'done', null, 'not_run']]);
  assert.equal(m.rows[2].output, null);
  assert.deepEqual(m.rows[2].usage.output_tokens, { a: 3, b: null, delta: null });
  assert.deepEqual([m.totals.paired, m.totals.not_run, m.totals.changed_turns], [2, 3, 4]);
});

test('comparisonDocument: versioned, follows docs/rerun-comparison.schema.json (Draft 2020-12); the schema refuses a broken one', () => {
  const out = rc.comparisonDocument(A, B, { state: 'ended', planned: 5, sent: 5 }, '2026-11-03T10:02:00.000Z');
  assert.equal(out.format, 'ratatoskr-run-comparison');
  assert.equal(out.version, 1);
  assert.equal(out.similarity, 'token_jaccard');
  assert.deepEqual(out.a, { role: 'recording', session_id: 's_a', agent: { agent_id: 'v1', display_name: 'Agent v1' }, started_at: '2026-11-03T10:00:00.000Z', turns: 5 });
  assert.deepEqual(out.run, { state: 'ended', planned: 5, sent: 5 });
  const stopped = rc.comparisonDocument(A, doc('s_c', 'v2', B.turns.slice(0, 1)), { state: 'cancelled', planned: 5, sent: 1 }, '2026-11-03T10:02:00.000Z');
  const broken = JSON.parse(JSON.stringify(out));
  broken.rows[1].tools[0].change = 'renamed';
  const check = (value) => execFileSync('python3', ['-c', [
    'import json, sys', 'from jsonschema import Draft202012Validator as V',
    's = json.load(open(sys.argv[1])); V.check_schema(s)',
    'errors = sorted(V(s).iter_errors(json.load(sys.stdin)), key=lambda e: list(e.absolute_path))',
    'print(json.dumps([list(map(str, e.absolute_path)) for e in errors]))'].join('\n'), SCHEMA], { input: JSON.stringify(value), encoding: 'utf8' });
  assert.deepEqual(JSON.parse(check(out)), [], 'the export follows the schema');
  assert.deepEqual(JSON.parse(check(stopped)), [], 'a stopped run\'s export too');
  assert.deepEqual(JSON.parse(check(broken)), [['rows', '1', 'tools', '0', 'change']], 'and the schema can fail');
});
