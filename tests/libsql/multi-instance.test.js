// The Playground on two Spin instances sharing one libSQL database: two real
// `spin up` (SPIN_BIN) serving the repo's spin.toml, their
// `[sqlite_database.default]` of type "libsql" pointing at the Turso CLI's
// sync server (`tursodb --sync-server`, pinned in package.json) through a
// recording proxy, so the test can say exactly what each side sent.
//
// The scenario (sign in on instance 1, mint on instance 2 with that session,
// run an inference there, read its trace on instance 1) is the claim to show.
// With Spin 4.0.2 and turso 0.6.0 it does not hold: the other tests pin where
// it stops, request and answer, as docs/libsql.md tells. When either side
// changes they fail, and docs/libsql.md must be revisited.
//
// RATATOSKR_LIBSQL_URL (and RATATOSKR_LIBSQL_TOKEN) put another libSQL server
// (a Hrana 3 one: sqld, Turso) behind the proxy instead: the scenario must
// pass there, and the tests of the turso gap do not apply.
'use strict';

const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '../..');
const SPIN = process.env.SPIN_BIN && fs.existsSync(process.env.SPIN_BIN) ? process.env.SPIN_BIN : null;
const OTHER_SERVER = process.env.RATATOSKR_LIBSQL_URL || null;
const DEMO_PASSWORD = 'demo-pw-libsql-4b7e21';
const ADMIN = 'admin@acme.test';
/// How long one `spin up` may take to serve (a cold cache compiles every component).
const START_MS = 90_000;
/// Every request the test makes: generous, the machine is shared.
const REQUEST_MS = 20_000;
/// What the whole file may take.
const FILE_MS = 300_000;
const GAP = 'Spin 4.0.2 speaks Hrana 3 over HTTP, turso 0.6.0 serves a subset of Hrana 2: docs/libsql.md';

// ---- processes -------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const children = [];

/// A child in its own process group, its output kept in memory.
function start(bin, args, options = {}) {
  const child = spawn(bin, args, { ...options, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  child.output = '';
  child.stdout.on('data', (d) => (child.output += d));
  child.stderr.on('data', (d) => (child.output += d));
  child.exited = new Promise((resolve) => child.once('exit', resolve));
  children.push(child);
  return child;
}

/// SIGINT to the group (Spin removes its working copy), SIGKILL if it lingers.
async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGINT');
  } catch {
    return;
  }
  const timer = new Promise((resolve) => setTimeout(resolve, 3_000, 'late'));
  if ((await Promise.race([child.exited, timer])) === 'late') {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {}
    await child.exited;
  }
}

async function until(what, child, ready, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await ready()) return;
    if (child.exitCode !== null) throw new Error(`${what} exited (${child.exitCode}) before it was ready:\n${child.output}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} was not ready within ${ms} ms:\n${child.output}`);
}

function accepts(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function tursodb() {
  const pkg = require.resolve(`@tursodatabase/cli-${process.platform}-${process.arch}-gnu/package.json`, {
    paths: [__dirname],
  });
  return path.join(path.dirname(pkg), 'tursodb');
}

async function startTurso(dir) {
  const port = await freePort();
  const child = start(tursodb(), [path.join(dir, 'playground.db'), '--sync-server', `127.0.0.1:${port}`]);
  await until('tursodb --sync-server', child, () => accepts(port), 20_000);
  return { url: `http://127.0.0.1:${port}`, port, child };
}

/// A TCP proxy in this process that keeps each connection's bytes both ways.
async function startRecorder(target) {
  const exchanges = [];
  const server = net.createServer((client) => {
    const exchange = { request: '', answer: '' };
    exchanges.push(exchange);
    const upstream = net.connect(target.port, target.host);
    client.on('data', (d) => {
      exchange.request += d.toString('latin1');
      upstream.write(d);
    });
    upstream.on('data', (d) => {
      exchange.answer += d.toString('latin1');
      client.write(d);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: server.address().port, exchanges, close: () => new Promise((r) => server.close(r)) };
}

/// `spin up` on the repo's spin.toml with `url` as the Playground's libSQL database.
async function startSpin(dir, name, url, token) {
  const home = path.join(dir, name);
  fs.mkdirSync(home);
  const config = path.join(home, 'runtime-config.toml');
  fs.writeFileSync(
    config,
    [
      '[key_value_store.default]',
      'type = "spin"',
      '',
      '[sqlite_database.default]',
      'type = "libsql"',
      `url = ${JSON.stringify(url)}`,
      `token = ${JSON.stringify(token)}`,
      '',
    ].join('\n'),
  );
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SPIN_VARIABLE_')));
  env.SPIN_VARIABLE_SEED_DEMO_DATA = 'true';
  env.SPIN_VARIABLE_DEMO_PASSWORD = DEMO_PASSWORD;
  const port = await freePort();
  const args = ['up', '--from', path.join(REPO, 'spin.toml'), '--listen', `127.0.0.1:${port}`];
  args.push('--runtime-config-file', config, '--log-dir', path.join(home, 'logs'), '--state-dir', path.join(home, 'state'));
  const child = start(SPIN, args, { cwd: home, env });
  await until(`spin up (${name})`, child, () => child.output.includes(`Serving http://127.0.0.1:${port}`), START_MS);
  const log = (component) => {
    try {
      return fs.readFileSync(path.join(home, 'logs', `${component}_stderr.txt`), 'utf8');
    } catch {
      return '';
    }
  };
  return { origin: `http://127.0.0.1:${port}`, child, log };
}

// ---- HTTP --------------------------------------------------------------------------

async function call(origin, method, route, { bearer, json } = {}) {
  const headers = {};
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (json !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(origin + route, {
    method,
    headers,
    body: json === undefined ? undefined : JSON.stringify(json),
    signal: AbortSignal.timeout(REQUEST_MS),
  });
  const body = await response.text();
  return { status: response.status, headers: response.headers, body };
}

const login = (origin) => call(origin, 'POST', '/admin/v1/auth/login', { json: { email: ADMIN, password: DEMO_PASSWORD } });

function sessionOf(answer) {
  const cookie = answer.headers.get('set-cookie') || '';
  const token = cookie.split(';')[0].split('=')[1] || '';
  assert.match(token, /^sess_/, `a session cookie: ${answer.status} ${answer.body}`);
  return token;
}

/// The HTTP exchanges of one recorded connection: [request head, request body, answer head, answer body].
function parse(exchange) {
  const [requestHead, requestBody = ''] = exchange.request.split('\r\n\r\n');
  const [answerHead, answerBody = ''] = exchange.answer.split('\r\n\r\n');
  return { requestHead, requestBody, answerHead, answerBody };
}

function direct(url, route, body) {
  return fetch(url + route, {
    method: body === undefined ? 'GET' : 'POST',
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_MS),
  }).then(async (r) => ({ status: r.status, body: await r.text() }));
}

/// The statements of components/playground/src/schema.rs's MIGRATIONS, in order,
/// the `gateway_ledger::` ones read from crates/gateway-ledger/src/lib.rs.
function migrationStatements() {
  const schema = fs.readFileSync(path.join(REPO, 'components/playground/src/schema.rs'), 'utf8');
  const ledger = fs.readFileSync(path.join(REPO, 'crates/gateway-ledger/src/lib.rs'), 'utf8');
  const constants = Object.fromEntries([...ledger.matchAll(/pub const (\w+): &str =\s*"([^"]*)";/g)].map((m) => [m[1], m[2]]));
  const block = schema.slice(schema.indexOf('const MIGRATIONS'), schema.indexOf('\n];\n', schema.indexOf('const MIGRATIONS')));
  return [...block.matchAll(/"([^"]*)"|gateway_ledger::(\w+)/g)].map((m) => {
    const sql = m[1] !== undefined ? m[1] : constants[m[2]];
    assert.ok(sql, `gateway_ledger::${m[2]} in crates/gateway-ledger/src/lib.rs`);
    return sql;
  });
}

// ---- the tests ---------------------------------------------------------------------

describe('the Playground on two Spin instances over libSQL', { skip: SPIN ? false : 'SPIN_BIN is not set', timeout: FILE_MS }, () => {
  let dir, turso, recorder, one, two;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-libsql-'));
    let target;
    if (OTHER_SERVER) {
      const url = new URL(OTHER_SERVER);
      target = { host: url.hostname, port: Number(url.port || 80) };
    } else {
      turso = await startTurso(dir);
      target = { host: '127.0.0.1', port: turso.port };
    }
    recorder = await startRecorder(target);
    const url = `http://127.0.0.1:${recorder.port}`;
    const token = process.env.RATATOSKR_LIBSQL_TOKEN || 'unused-by-tursodb';
    // One after the other: two cold starts at once would double the compile time.
    one = await startSpin(dir, 'one', url, token);
    two = await startSpin(dir, 'two', url, token);
  });

  after(async () => {
    await Promise.all(children.map(stop));
    if (recorder) await recorder.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test(
    'sign in on instance 1, mint and infer on instance 2, read the trace on instance 1',
    { todo: OTHER_SERVER ? false : GAP },
    async () => {
      const signedIn = await login(one.origin);
      assert.equal(signedIn.status, 200, `sign-in on instance 1: ${signedIn.body}\n${one.log('playground')}`);
      const session = sessionOf(signedIn);

      const minted = await call(two.origin, 'POST', '/admin/v1/playground/token', {
        bearer: session,
        json: { gateway_id: 'gw_acme_main' },
      });
      assert.equal(minted.status, 200, `the instance-1 session mints on instance 2: ${minted.body}`);
      const { token } = JSON.parse(minted.body);
      assert.match(token, /^myra_/);

      const chat = await call(two.origin, 'POST', '/admin/v1/gw/acme/main/v1/chat/completions', {
        bearer: token,
        json: { model: 'ratatoskr-small', stream: true, messages: [{ role: 'user', content: 'hello from two' }] },
      });
      assert.equal(chat.status, 200, chat.body);
      assert.match(chat.body, /data: \[DONE\]/);
      const traceId = chat.headers.get('x-trace-id');
      assert.ok(traceId, 'the inference names its trace');

      const trace = await call(one.origin, 'GET', `/admin/v1/traces/${traceId}`, { bearer: session });
      assert.equal(trace.status, 200, `instance 1 reads the trace instance 2 wrote: ${trace.body}`);
      const read = JSON.parse(trace.body);
      assert.equal(read.trace.id, traceId);
      assert.equal(read.trace.gateway_id, 'gw_acme_main');
      assert.ok(read.steps.length > 0, trace.body);
      assert.ok(!trace.body.includes(token), 'the token is never in a trace');
    },
  );

  test('where it stops: Spin posts Hrana 3 /v3/cursor, tursodb answers 404', { skip: OTHER_SERVER ? 'another server' : false }, async () => {
    // A fresh request on each instance: both fail the same way at their first statement.
    for (const instance of [one, two]) {
      const before = recorder.exchanges.length;
      const answer = await login(instance.origin);
      assert.equal(answer.status, 500, answer.body);
      assert.equal(JSON.parse(answer.body).error_code, 'storage_error');
      const mine = recorder.exchanges.slice(before).map(parse);
      assert.ok(mine.length > 0, 'the Playground reached the libSQL server');
      const first = mine[0];
      assert.match(first.requestHead, /^POST \/v3\/cursor HTTP\/1\.1\r\n/);
      assert.match(first.requestHead, /\r\nx-libsql-client-version: libsql-remote-0\.5\.0(\r\n|$)/i);
      assert.match(first.requestHead, /\r\nauthorization: Bearer unused-by-tursodb(\r\n|$)/i);
      const cursor = JSON.parse(first.requestBody);
      assert.equal(cursor.baton, null);
      assert.match(cursor.batch.steps[0].stmt.sql, /^SELECT \(SELECT MAX ?\(version\) FROM schema_version\)/);
      assert.match(first.answerHead, /^HTTP\/1\.1 404 Not Found\r\n/);
      assert.equal(first.answerBody, 'Not Found');
      // No request ever reached a path tursodb serves, and none asked which version it speaks.
      for (const exchange of mine) {
        assert.match(exchange.requestHead, /^POST \/v3\/(cursor|pipeline) /, exchange.requestHead);
      }
      assert.match(instance.log('playground'), /migrations failed: Error::Io\("Hrana: `api error: `Not Found``"\)/);
    }
  });

  test('a url ending in /v2/pipeline# routes Spin to tursodb\'s path, but with a Hrana 3 cursor body', { skip: OTHER_SERVER ? 'another server' : false }, async () => {
    // The client appends /v3/cursor to the configured url; a fragment swallows it.
    const tricked = await startSpin(dir, 'fragment', `http://127.0.0.1:${recorder.port}/v2/pipeline#`, 'unused-by-tursodb');
    try {
      const before = recorder.exchanges.length;
      const answer = await login(tricked.origin);
      assert.equal(answer.status, 500, answer.body);
      const first = parse(recorder.exchanges[before]);
      assert.match(first.requestHead, /^POST \/v2\/pipeline HTTP\/1\.1\r\n/);
      const body = JSON.parse(first.requestBody);
      assert.deepEqual(Object.keys(body).sort(), ['batch', 'baton'], 'a CursorReqBody, not a PipelineReqBody');
      assert.match(first.answerHead, /^HTTP\/1\.1 500 Internal Server Error\r\n/);
      assert.match(first.answerBody, /^Internal Server Error: Failed to parse pipeline request: missing field `requests`/);
    } finally {
      await stop(tricked.child);
    }
  });

  test('the Playground\'s migrations run on tursodb\'s SQL, twice (by /v2/pipeline, not through Spin)', { skip: OTHER_SERVER ? 'another server' : false }, async () => {
    const statements = migrationStatements();
    assert.ok(statements.length >= 19, `the migrations of schema.rs: ${statements.length} statements found`);
    for (const round of [1, 2]) {
      for (const sql of statements) {
        const answer = await direct(turso.url, '/v2/pipeline', { baton: null, requests: [{ type: 'execute', stmt: { sql } }] });
        assert.equal(answer.status, 200, answer.body);
        const result = JSON.parse(answer.body).results[0];
        if (round === 2 && sql.startsWith('ALTER TABLE')) {
          // What schema::migrate tolerates from a racing request.
          assert.match(result.error.message, /duplicate column name/, sql);
        } else {
          assert.equal(result.type, 'ok', `${sql}: ${JSON.stringify(result)}`);
        }
      }
    }
  });

  test('tursodb 0.6.0 serves only POST /v2/pipeline with execute and batch', { skip: OTHER_SERVER ? 'another server' : false }, async () => {
    // Hrana 3 over HTTP: GET /v3 answers 2xx where v3 is served; Hrana over HTTP v2 says the same of GET /v2.
    for (const route of ['/v3', '/v3/pipeline', '/v3/cursor', '/v2']) {
      const answer = await direct(turso.url, route, route === '/v3' || route === '/v2' ? undefined : { baton: null });
      assert.equal(answer.status, 404, `${route}: ${answer.body}`);
    }
    const select = await direct(turso.url, '/v2/pipeline', {
      baton: null,
      requests: [{ type: 'execute', stmt: { sql: 'SELECT 1 AS x' } }],
    });
    assert.equal(select.status, 200, select.body);
    const result = JSON.parse(select.body);
    assert.equal(result.baton, null, 'no stream is kept: the baton is always null');
    assert.deepEqual(result.results[0].response.result.rows, [[{ type: 'integer', value: '1' }]]);
    // `close` (and `get_autocommit`, which Spin's client sends with every batch) are Hrana stream requests.
    for (const type of ['close', 'get_autocommit']) {
      const refused = await direct(turso.url, '/v2/pipeline', { baton: null, requests: [{ type }] });
      assert.equal(refused.status, 500);
      assert.match(refused.body, new RegExp(`unknown variant \`${type}\`, expected \`execute\` or \`batch\``));
    }
  });

  test('tursodb 0.6.0 runs every request on one connection: a transaction outlives its request', { skip: OTHER_SERVER ? 'another server' : false }, async () => {
    const execute = (sql) =>
      direct(turso.url, '/v2/pipeline', { baton: null, requests: [{ type: 'execute', stmt: { sql } }] }).then((a) => {
        assert.equal(a.status, 200, a.body);
        const body = JSON.parse(a.body);
        assert.equal(body.baton, null, 'the server says it closed the stream');
        return body.results[0];
      });
    assert.equal((await execute('BEGIN IMMEDIATE')).type, 'ok');
    // Another request, a new stream by the spec (baton null): it is inside the first one's transaction.
    const again = await execute('BEGIN IMMEDIATE');
    assert.equal(again.type, 'error');
    assert.match(again.error.message, /cannot start a transaction within a transaction/);
    assert.equal((await execute('ROLLBACK')).type, 'ok');
    const none = await execute('ROLLBACK');
    assert.match(none.error.message, /no transaction is active/);
  });
});
