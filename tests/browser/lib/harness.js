'use strict';
// Shared set-up for the browser tests: each suite's before/after (suiteSetup),
// the real host binary on a free port, Debian's Chromium driven by
// playwright-core, and an instrumented page.

const { before, after } = require('node:test');
const { spawn } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');
const { INSTRUMENT } = require('./instrument');

const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
const HOST_BIN = process.env.RATATOSKR_HOST_BIN || path.join(REPO_ROOT, 'target', 'host', 'ratatoskr-host');
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARTIFACTS = path.join(REPO_ROOT, 'target', 'browser-artifacts');
const INDEX_HTML = path.join(REPO_ROOT, 'static', 'index.html');
// The console's ES modules, and their paths on the site (/js/name.js).
const MODULES_DIR = path.join(REPO_ROOT, 'static', 'js');
const CONSOLE_MODULES = fs.readdirSync(MODULES_DIR).filter((name) => name.endsWith('.js')).sort().map((name) => '/js/' + name);

/** A random admin key: the simulator and the console share it server-side. */
function randomKey() {
  return 'adm-' + crypto.randomBytes(12).toString('hex');
}

/** The runtime under test: `RATATOSKR_TEST_RUNTIME=spin` (with SPIN_BIN) is real Spin. */
const SPIN_BIN = process.env.RATATOSKR_TEST_RUNTIME === 'spin' ? process.env.SPIN_BIN : null;
if (process.env.RATATOSKR_TEST_RUNTIME === 'spin' && !(SPIN_BIN && fs.existsSync(SPIN_BIN))) {
  throw new Error('RATATOSKR_TEST_RUNTIME=spin needs SPIN_BIN, the spin binary');
}
/**
 * `wasmtime-serve` (with WASMTIME_BIN) and `jco` (JCO_BIN, or the pinned jco in
 * tests/runtimes) serve the portable console (ratatoskr_console.wasm) instead:
 * the site and /api in one component, configured by RATATOSKR_<VARIABLE>.
 */
const PORTABLE = ['wasmtime-serve', 'jco'].includes(process.env.RATATOSKR_TEST_RUNTIME) ? process.env.RATATOSKR_TEST_RUNTIME : null;
const CONSOLE_WASM = path.join(REPO_ROOT, 'target', 'wasm32-wasip2', 'release', 'ratatoskr_console.wasm');
const JCO_BIN = process.env.JCO_BIN || path.join(REPO_ROOT, 'tests', 'runtimes', 'node_modules', '@bytecodealliance', 'jco', 'dist', 'jco.js');

/** `{ skip }` for a test of what jco's Node shim does otherwise (docs/runtimes.md lists each). */
function notOnJco(reason) {
  return skipWhen(PORTABLE === 'jco', reason);
}

/** The portable console has no key-value store: its affect history answers the typed 503. */
const PORTABLE_NETWORK_ERRORS = PORTABLE ? [{ path: /^\/api\/affect\/history\?/, status: 503 }] : [];

/**
 * `{ skip }` for a test that needs a part of the Spin app the portable console
 * has not (a key-value store, the simulator, the Playground): the portable lanes
 * skip it, and list it with the component tests' skips.
 */
function spinAppOnly(reason) {
  return skipWhen(Boolean(PORTABLE), reason);
}

function skipWhen(skip, reason) {
  if (!skip) return false;
  if (process.env.RATATOSKR_SKIP_LOG) fs.appendFileSync(process.env.RATATOSKR_SKIP_LOG, `browser: ${reason}\n`);
  return reason;
}

/** A port nothing listens on right now (bound, then released for the server). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = require('node:net').createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * A free port below Linux's ephemeral range (32768-60999): `jco serve` binds fifty
 * request workers to ephemeral ports while it starts, one of which could take a port
 * freePort() had just released.
 */
async function portBelowEphemeral() {
  const net = require('node:net');
  for (;;) {
    const port = 20000 + crypto.randomInt(12000);
    const free = await new Promise((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/**
 * Starts the app (`ratatoskr-host up`, or `spin up` in the real-Spin lane) with an
 * in-memory key-value store, a database file of its own and the given variables;
 * resolves once it prints "Serving http://ADDR".
 */
async function startHost({ variables = {} } = {}) {
  if (!SPIN_BIN && !PORTABLE && !fs.existsSync(HOST_BIN)) {
    throw new Error(`${HOST_BIN} is missing: build it with \`cargo build --profile host -p ratatoskr-host\` (scripts/test.sh does)`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-browser-'));
  const runtimeConfig = path.join(dir, 'runtime-config.toml');
  // The key-value store in memory (it lives as long as the app); the database in a
  // file of this run: an in-memory SQLite database is new and empty per `open` in Spin.
  fs.writeFileSync(runtimeConfig, '[key_value_store.default]\ntype = "spin"\n\n[sqlite_database.default]\ntype = "spin"\npath = "sqlite_db.db"\n');
  // Only what the test passes: no SPIN_VARIABLE_* from the caller's shell.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SPIN_VARIABLE_')));
  let bin; let args; let cwd;
  if (PORTABLE) {
    // The console's variables as a user sets them on any runtime; it reads only its own.
    for (const [name, value] of Object.entries(variables)) env['RATATOSKR_' + name.toUpperCase()] = value;
    const names = Object.keys(variables).map((name) => 'RATATOSKR_' + name.toUpperCase());
    const port = String(await portBelowEphemeral());
    if (PORTABLE === 'jco') {
      bin = process.execPath;
      // The default pool of 50 request workers: jco serve keeps a worker for each event
      // stream whose client left (the console's session switches) until its upstream ends it.
      args = [JCO_BIN, 'serve', '--isolate-requests', '--host', '127.0.0.1', '--port', port,
        '--jco-dir', path.join(dir, 'jco'), CONSOLE_WASM];
    } else {
      bin = process.env.WASMTIME_BIN;
      args = ['serve', '-Scli', '--addr', `127.0.0.1:${port}`, ...names.flatMap((name) => ['--env', name]), CONSOLE_WASM];
    }
    cwd = dir;
  } else if (SPIN_BIN) {
    // Spin takes variables from SPIN_VARIABLE_* only, and a port to listen on.
    bin = SPIN_BIN;
    args = ['up', '--from', path.join(REPO_ROOT, 'spin.toml'), '--listen', `127.0.0.1:${await freePort()}`,
      '--runtime-config-file', runtimeConfig, '--log-dir', path.join(dir, 'logs'), '--state-dir', path.join(dir, 'state')];
    for (const [name, value] of Object.entries(variables)) env['SPIN_VARIABLE_' + name.toUpperCase()] = value;
    cwd = dir;
  } else {
    bin = HOST_BIN;
    args = ['up', '--listen', '127.0.0.1:0', '--runtime-config-file', runtimeConfig];
    for (const [name, value] of Object.entries(variables)) args.push('--variable', `${name}=${value}`);
    cwd = REPO_ROOT;
  }
  // Its own process group: `jco serve` runs its server in a second process, stopped with it.
  const proc = spawn(bin, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: Boolean(PORTABLE) });
  const log = [];
  let exited = null;
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the app did not start in 60 s:\n' + log.join('\n'))), 60_000);
    let buffer = '';
    const onData = (chunk) => {
      buffer += chunk.toString('utf8');
      const lines = buffer.split('\n');
      buffer = lines.pop();
      for (const line of lines) {
        log.push(line);
        if (log.length > 2000) log.shift();
        // Spin and the host; wasmtime serve; jco serve.
        const m = /Serving (?:HTTP on )?(http:\/\/[^\s/]+)/.exec(line) || /Server listening @ (\S+?)\.\.\./.exec(line);
        if (m) { clearTimeout(timer); resolve(m[1].startsWith('http') ? m[1] : 'http://' + m[1]); }
      }
    };
    proc.stderr.on('data', onData);
    proc.stdout.on('data', onData);
    proc.on('exit', (code, signal) => {
      exited = { code, signal };
      clearTimeout(timer);
      reject(new Error(`the app exited (${code ?? signal}) before serving:\n` + log.join('\n')));
    });
  });
  const host = {
    url,
    log,
    proc,
    get exited() { return exited; },
    async stop() {
      if (exited) return;
      const gone = new Promise((resolve) => proc.once('exit', resolve));
      const signal = (sig) => { try { if (PORTABLE) process.kill(-proc.pid, sig); else proc.kill(sig); } catch (_) { /* gone */ } };
      signal('SIGINT');
      const t = setTimeout(() => { if (!exited) signal('SIGKILL'); }, 3000);
      await gone;
      clearTimeout(t);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await checkCspIsCurrent(host);
  } catch (e) {
    await host.stop();
    throw e;
  }
  return host;
}

/**
 * The page's CSP allows its inline style (and any inline script) by hash, computed
 * by the precompress step. A stale target/static-precompressed would block it and
 * every test would fail obscurely, so say so up front.
 */
async function checkCspIsCurrent(host) {
  const html = fs.readFileSync(INDEX_HTML, 'utf8').replace(/\r\n?/g, '\n');
  const response = await fetch(host.url + '/');
  await response.arrayBuffer();
  const csp = response.headers.get('content-security-policy') || '';
  const inline = [...html.matchAll(/<(script|style)>([\s\S]*?)<\/\1>/g)];
  if (!inline.some(([, tag]) => tag === 'style')) throw new Error('static/index.html has no inline <style>');
  for (const [, tag, body] of inline) {
    const hash = 'sha256-' + crypto.createHash('sha256').update(body, 'utf8').digest('base64');
    if (!csp.includes(`'${hash}'`)) {
      throw new Error(`the served CSP does not allow static/index.html's inline ${tag} (${hash}); ` +
        'refresh target/static-precompressed (scripts/test.sh runs the precompress step). CSP: ' + csp);
    }
  }
}

/**
 * The set-up every browser suite shares, registered on the suite that calls it.
 * Before its tests, `start(own)` starts what they need (the app, mocks, a proxy,
 * the browser) and hands each to `own`, which returns it. After them, everything
 * owned is stopped, the last started first: the browser with close(), the rest
 * with stop(); also when a start failed half-way, and each even if one fails.
 */
function suiteSetup(start) {
  const owned = [];
  before(() => start((resource) => { owned.push(resource); return resource; }));
  after(async () => {
    let failure = null;
    for (const resource of owned.reverse()) {
      try {
        await (typeof resource.stop === 'function' ? resource.stop() : resource.close());
      } catch (e) {
        failure = failure || e;
      }
    }
    if (failure) throw failure;
  });
}

const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/**
 * Debian's Chromium, headless; playwright-core gives it a fresh --user-data-dir.
 * `args`: more switches (e.g. a --host-resolver-rules that plays DNS rebinding).
 */
async function launchBrowser({ args = [] } = {}) {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (scripts/test.sh does)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS, ...args] });
}

/**
 * A new context + page with the instrumentation init script, and collectors for
 * console errors, page errors, dialogs and requests.
 * `allowNetworkErrors`: [{ path: RegExp, status: number }] — resource-load errors
 * Chromium logs to the console for an expected HTTP status (e.g. the affect 404
 * "no snapshot yet"), which are not the page's errors.
 * `initScripts`: more functions to run before the page's own script (e.g. an observer).
 * `path`: where to open the console (e.g. '/#playground').
 */
async function openConsole(browser, baseUrl, { viewport = { width: 1280, height: 800 }, allowNetworkErrors = [], initScripts = [], path: at = '/' } = {}) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  await page.addInitScript(INSTRUMENT);
  for (const script of initScripts) await page.addInitScript(script);
  const problems = { consoleErrors: [], pageErrors: [], dialogs: [], requests: [] };
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    const where = msg.location() || {};
    if (/^Failed to load resource: the server responded with a status of (\d+)/.test(text)) {
      const status = Number(RegExp.$1);
      const u = where.url ? new URL(where.url) : null;
      const target = u ? u.pathname + u.search : '';
      if (allowNetworkErrors.concat(PORTABLE_NETWORK_ERRORS).some((a) => a.status === status && a.path.test(target))) return;
    }
    problems.consoleErrors.push(text + (where.url ? ` (${where.url}:${where.lineNumber})` : ''));
  });
  page.on('pageerror', (err) => problems.pageErrors.push(String(err && err.stack || err)));
  page.on('dialog', (dialog) => { problems.dialogs.push(dialog.type() + ': ' + dialog.message()); dialog.dismiss().catch(() => {}); });
  page.on('request', (req) => problems.requests.push({ url: req.url(), method: req.method(), at: Date.now() }));
  await page.goto(baseUrl + at);
  await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
  return { context, page, problems };
}

/** What the instrumentation recorded, in a serialisable form. */
async function record(page) {
  return page.evaluate(() => window.__rec.snapshot());
}

/** Asserts the page is clean: no console/page errors, dialogs, CSP violations, canary. */
async function assertClean(assert, page, problems, label = '') {
  const rec = await record(page);
  assert.deepEqual(problems.pageErrors, [], `${label} uncaught page errors`);
  assert.deepEqual(problems.consoleErrors, [], `${label} console errors`);
  assert.deepEqual(problems.dialogs, [], `${label} dialogs opened`);
  assert.deepEqual(rec.cspViolations, [], `${label} CSP violations`);
  assert.equal(rec.xss, undefined, `${label} the XSS canary window.__xss was set`);
  assert.equal(rec.xssCalls, 0, `${label} the XSS canary was touched`);
  return rec;
}

async function screenshot(page, name, { fullPage = false } = {}) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const file = path.join(ARTIFACTS, name + '.png');
  await page.screenshot({ path: file, fullPage });
  return file;
}

/** Waits for the page-side condition, with a readable failure. */
async function waitFor(page, fn, arg, { timeout = 10_000, what = 'condition' } = {}) {
  try {
    return await page.waitForFunction(fn, arg, { timeout, polling: 'raf' });
  } catch (e) {
    throw new Error(`timed out after ${timeout} ms waiting for ${what}: ${e.message.split('\n')[0]}`);
  }
}

async function startSession(page, agentId) {
  const before = await page.textContent('#session-id');
  await page.selectOption('#agent-select', agentId);
  await page.click('#start-session');
  await waitFor(page, (prev) => {
    const t = document.getElementById('session-id').textContent;
    return t !== prev && t !== 'none' && !document.getElementById('message').disabled;
  }, before, { what: `a new session for ${agentId}` });
  return page.textContent('#session-id');
}

/** Types a message and sends it with Enter. */
async function sendWithEnter(page, text) {
  await page.fill('#message', text);
  await page.focus('#message');
  await page.keyboard.press('Enter');
}

/**
 * After a turn on the simulator: waits until every pane it feeds is filled
 * (the delayed affect emit, BifrostState's last dispatch, an admin event).
 */
async function waitForPanesAfterTurn(page) {
  await waitFor(page, () => document.querySelector('#affect .metric'), undefined, { timeout: 15_000, what: 'the affect snapshot' });
  await waitForLastDispatch(page);
  await waitFor(page, () => document.querySelectorAll('#admin-events li').length > 0, undefined, { timeout: 15_000, what: 'an admin event' });
}

/**
 * Waits until BifrostState shows a last dispatch: the page refetches it after
 * a turn, and on a slow runtime that answer can land well after the turn ends.
 */
async function waitForLastDispatch(page, { timeout } = {}) {
  await waitFor(page, () => /last dispatch/.test(document.getElementById('bifrost').textContent) && !/none yet/.test(document.getElementById('bifrost').textContent),
    undefined, { timeout, what: 'BifrostState after the turn' });
}

/** Waits for the current turn's terminal status line; returns its class kind and text. */
async function waitForTerminal(page, { timeout = 30_000 } = {}) {
  await waitFor(page, () => {
    const msgs = document.querySelectorAll('#transcript .msg.assistant');
    const last = msgs[msgs.length - 1];
    return last && last.querySelector('.status-line') && !window.ratatoskrConsole.state.turnRunning;
  }, undefined, { timeout, what: 'the turn to end' });
  return page.evaluate(() => {
    const msgs = document.querySelectorAll('#transcript .msg.assistant');
    const line = msgs[msgs.length - 1].querySelector('.status-line');
    return { kind: [...line.classList].find((c) => c !== 'status-line'), text: line.textContent, t: window.__rec.lastStatusAt };
  });
}

/**
 * Sideways overflow anywhere: the document, the body, any pane sticking out of
 * the viewport, and any element that scrolls sideways (overflow-x auto/scroll).
 */
async function horizontalOverflow(page) {
  return page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const scrollers = [];
    for (const node of document.body.querySelectorAll('*')) {
      if (['SELECT', 'TEXTAREA', 'INPUT', 'OPTION'].includes(node.tagName)) continue;
      const ox = getComputedStyle(node).overflowX;
      if ((ox === 'auto' || ox === 'scroll') && node.scrollWidth > node.clientWidth + 1) {
        scrollers.push((node.id ? '#' + node.id : node.tagName.toLowerCase() + '.' + node.className) + ' +' + (node.scrollWidth - node.clientWidth));
      }
    }
    return {
      doc: document.documentElement.scrollWidth - vw,
      body: document.body.scrollWidth - document.body.clientWidth,
      panesOutside: [...document.querySelectorAll('.pane, header')].filter((p) => p.getBoundingClientRect().right > vw + 1).map((p) => p.id || p.tagName),
      scrollers,
    };
  });
}

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

module.exports = {
  SPIN_BIN, PORTABLE, spinAppOnly, notOnJco, skipWhen, REPO_ROOT, ARTIFACTS, INDEX_HTML, MODULES_DIR, CONSOLE_MODULES, randomKey, startHost, launchBrowser, suiteSetup, openConsole, record,
  assertClean, screenshot, waitFor, horizontalOverflow, startSession, sendWithEnter, waitForTerminal, waitForPanesAfterTurn, waitForLastDispatch, sleep,
};
