'use strict';
// The app behind the reverse proxies operators run: Debian's nginx (in its
// default form, which rewrites Host to the app's address, and passing Host),
// Caddy and HAProxy, each started here from the README's own snippet with only
// its ports and file paths changed, terminating TLS with a certificate made for
// the test. Through each, in Chromium: the Playground's sign-in and its
// `__Host-` Secure cookie, a mint and a chat through the pass-through with that
// cookie, the console opened by it (`console_access = "signed-in"`), a turn
// and the admin events arriving as streamed, and cross-site writes refused.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const https = require('node:https');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const h = require('../browser/lib/harness');
const { INSTRUMENT } = require('../browser/lib/instrument');
const { MockUpstream } = require('../browser/lib/mock-upstream');

const NAME = 'console.lan';
const DEMO_PASSWORD = 'pw-' + crypto.randomBytes(8).toString('hex');
const README = path.join(h.REPO_ROOT, 'README.md');
// What the README's snippets say, which the test replaces.
const README_APP = '127.0.0.1:3000';
const README_PORT = '8443';

/** The README's one fenced block of `lang`. */
function readmeSnippet(lang) {
  const markdown = fs.readFileSync(README, 'utf8').replace(/\r\n?/g, '\n');
  const blocks = [...markdown.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm'))];
  assert.equal(blocks.length, 1, `the README has one \`\`\`${lang} block`);
  return blocks[0][1];
}

/** `text` with each `[from, to]` replaced; each `from` must be there. */
function substitute(text, pairs) {
  for (const [from, to] of pairs) {
    assert.ok(text.includes(from), `the snippet has ${JSON.stringify(from)}`);
    text = text.split(from).join(to);
  }
  return text;
}

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

function connects(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
  });
}

/** A self-signed certificate for NAME: its .crt, .key and the two in one .pem (HAProxy's form). */
function makeCertificate(dir) {
  const crt = path.join(dir, 'console.lan.crt');
  const key = path.join(dir, 'console.lan.key');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=' + NAME,
    '-addext', 'subjectAltName=DNS:' + NAME, '-keyout', key, '-out', crt], { stdio: 'ignore' });
  const pem = path.join(dir, 'console.lan.pem');
  fs.writeFileSync(pem, fs.readFileSync(crt, 'utf8') + fs.readFileSync(key, 'utf8'));
  return { crt, key, pem };
}

/** Starts `bin args` and resolves once `port` accepts connections; `stop()` ends it. */
async function startProxy(name, port, bin, args, env = process.env) {
  const proc = spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = [];
  const keep = (chunk) => { log.push(...chunk.toString('utf8').split('\n').filter(Boolean)); log.splice(0, Math.max(0, log.length - 200)); };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  let exited = null;
  const gone = new Promise((resolve) => proc.once('exit', (code, signal) => { exited = code ?? signal; resolve(); }));
  const deadline = Date.now() + 30_000;
  while (!(await connects(port))) {
    if (exited !== null) throw new Error(`${name} exited (${exited}) before listening:\n${log.join('\n')}`);
    if (Date.now() > deadline) { proc.kill('SIGKILL'); throw new Error(`${name} did not listen on ${port} in 30 s:\n${log.join('\n')}`); }
    await h.sleep(100);
  }
  return {
    name, port, log,
    async stop() {
      if (exited !== null) return;
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await gone;
      clearTimeout(t);
    },
  };
}

async function startNginx(dir, cert, app, { passHost }) {
  const port = await freePort();
  let server = substitute(readmeSnippet('nginx'), [
    [`listen ${README_PORT} ssl`, `listen ${port} ssl`],
    ['/etc/ssl/console.lan.crt', cert.crt],
    ['/etc/ssl/console.lan.key', cert.key],
    [`proxy_pass http://${README_APP};`, `proxy_pass http://${app};`],
  ]);
  // docs/reverse-proxy.md's variant: the browser's Host passed on as it is.
  if (passHost) server = substitute(server, [[`proxy_pass http://${app};`, `proxy_pass http://${app};\n        proxy_set_header Host $http_host;`]]);
  const prefix = path.join(dir, passHost ? 'nginx-host' : 'nginx');
  fs.mkdirSync(prefix);
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `${t}_temp_path ${path.join(prefix, t)};`).join('\n  ');
  const conf = [
    // As root, nginx's workers would drop to nobody, who cannot enter this private directory.
    process.getuid() === 0 ? 'user root;' : '',
    'daemon off;', 'worker_processes 1;', `pid ${path.join(prefix, 'nginx.pid')};`, 'error_log stderr warn;',
    'events { worker_connections 256; }',
    `http {\n  access_log off;\n  ${temp}\n${server}}\n`,
  ].join('\n');
  fs.writeFileSync(path.join(prefix, 'nginx.conf'), conf);
  return startProxy(passHost ? 'nginx (Host passed on)' : 'nginx', port, 'nginx', ['-p', prefix, '-c', path.join(prefix, 'nginx.conf'), '-e', 'stderr']);
}

async function startCaddy(dir, app) {
  const port = await freePort();
  const site = substitute(readmeSnippet('caddy'), [[`${NAME}:${README_PORT}`, `${NAME}:${port}`], [`reverse_proxy ${README_APP}`, `reverse_proxy ${app}`]]);
  const home = path.join(dir, 'caddy');
  fs.mkdirSync(home);
  // The test's own global options: no admin endpoint, no port 80, and the
  // internal CA kept in this directory, out of the system's trust store.
  const global = `{\n\tadmin off\n\tauto_https disable_redirects\n\tskip_install_trust\n\tstorage file_system ${path.join(home, 'data')}\n}\n`;
  fs.writeFileSync(path.join(home, 'Caddyfile'), global + site);
  const env = { ...process.env, HOME: home, XDG_DATA_HOME: path.join(home, 'xdg-data'), XDG_CONFIG_HOME: path.join(home, 'xdg-config') };
  return startProxy('Caddy', port, 'caddy', ['run', '--config', path.join(home, 'Caddyfile'), '--adapter', 'caddyfile'], env);
}

async function startHaproxy(dir, cert, app) {
  const port = await freePort();
  const conf = substitute(readmeSnippet('haproxy'), [
    [`bind :${README_PORT} ssl crt /etc/haproxy/console.lan.pem`, `bind 127.0.0.1:${port} ssl crt ${cert.pem}`],
    [`server app ${README_APP}`, `server app ${app}`],
  ]);
  const file = path.join(dir, 'haproxy.cfg');
  fs.writeFileSync(file, conf);
  return startProxy('HAProxy', port, 'haproxy', ['-db', '-f', file]);
}

/** One request to the proxy from Node, with the browser's name (SNI and Host). */
function request(port, method, target, headers = {}, body = '') {
  return new Promise((resolve, reject) => {
    const req = https.request({
      host: '127.0.0.1', port, servername: NAME, method, path: target, rejectUnauthorized: false,
      headers: { host: `${NAME}:${port}`, 'content-length': Buffer.byteLength(body), ...headers },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try { json = JSON.parse(text); } catch (_) { /* not JSON */ }
        resolve({ status: res.statusCode, text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

// The mock upstream's turn: events 400 ms apart, so a proxy that held the
// stream would bunch them, which the console's buffering detector tells.
const SPREAD = [[400, 'thinking', { delta: 'one' }], [400, 'text', { delta: 'two ' }], [400, 'text', { delta: 'three ' }],
  [400, 'text', { delta: 'four' }], [0, 'done', { usage: { input_tokens: 2, output_tokens: 4 }, finish_reason: 'stop' }]];

function scenario() {
  return {
    agents: [{ agent_id: 'spread', display_name: 'Agent spread' }],
    tools: (session) => ({ session_id: session.session_id, agent_id: session.agent_id, tools: [] }),
    bifrost: (session) => ({
      session_id: session.session_id, agent_id: session.agent_id, endpoint: 'http://mock.invalid/v1', model: 'mock-1',
      caps: {}, tools: [], bound_at: '2026-11-01T09:00:00Z', inflight_turns: 0, last_dispatch: null,
    }),
    affect: () => ({ status: 404 }),
    adminEvents: (session) => [
      { type: 'session.created', data: { session_id: session.session_id, agent_id: session.agent_id, timestamp: '2026-11-01T09:00:01Z' } },
      { type: 'turn.queued', data: { session_id: session.session_id, position: 1 } },
    ],
    async turn(ctx) {
      for (const [delay, event, data] of SPREAD) {
        if (delay) await ctx.sleep(delay);
        if (ctx.cancelled) return;
        ctx.send(event, event === 'done' ? { turn_id: ctx.turnId, ...data } : data);
      }
    },
  };
}

// Resource errors Chromium logs for answers the page expects: 401 before
// sign-in (console_access = "signed-in"), 404 for an agent with no affect yet.
const EXPECTED_401 = /^\/(api\/|admin\/v1\/auth\/me)/;

describe('behind nginx, Caddy and HAProxy', () => {
  let browser, mock, app, proxies;

  h.suiteSetup(async (own) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-proxies-'));
    own({ stop: () => fs.rmSync(dir, { recursive: true, force: true }) });
    const cert = makeCertificate(dir);
    mock = own(await new MockUpstream(scenario()).start());
    app = own(await h.startHost({ variables: {
      ...mock.variables(), seed_demo_data: 'true', demo_password: DEMO_PASSWORD,
      console_access: 'signed-in', allowed_hosts: NAME, trusted_proxies: '127.0.0.1, ::1',
    } }));
    const upstream = new URL(app.url).host;
    proxies = [
      own(await startNginx(dir, cert, upstream, { passHost: false })),
      own(await startNginx(dir, cert, upstream, { passHost: true })),
      own(await startCaddy(dir, upstream)),
      own(await startHaproxy(dir, cert, upstream)),
    ];
    browser = own(await h.launchBrowser({ args: [`--host-resolver-rules=MAP ${NAME} 127.0.0.1`] }));
  });

  for (const which of ['nginx', 'nginx (Host passed on)', 'Caddy', 'HAProxy']) {
    test(`through ${which}: sign-in, the __Host- cookie, mint and chat, the console's streams, cross-site writes refused`, async () => {
      const proxy = proxies.find((p) => p.name === which);
      const base = `https://${NAME}:${proxy.port}`;
      const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } });
      try {
        const page = await context.newPage();
        await page.addInitScript(INSTRUMENT);
        const problems = { pageErrors: [], consoleErrors: [], dialogs: [] };
        const statuses = [];
        page.on('pageerror', (e) => problems.pageErrors.push(String(e)));
        page.on('dialog', (d) => { problems.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
        page.on('response', (r) => statuses.push([r.request().method(), new URL(r.url()).pathname, r.status()]));
        page.on('console', (msg) => {
          if (msg.type() !== 'error') return;
          const where = msg.location() && msg.location().url;
          const at = where ? new URL(where).pathname : '';
          if (/status of 401/.test(msg.text()) && EXPECTED_401.test(at)) return;
          if (/status of 404/.test(msg.text()) && at.startsWith('/api/affect')) return;
          problems.consoleErrors.push(msg.text());
        });

        // The Playground's sign-in: the browser's Origin is the proxy's https origin.
        await page.goto(base + '/#playground');
        await h.waitFor(page, () => !document.getElementById('pg-login-form').hidden, undefined, { what: 'the sign-in form' });
        await page.fill('#pg-email', 'admin@acme.test');
        await page.fill('#pg-password', DEMO_PASSWORD);
        await page.click('#pg-login');
        await h.waitFor(page, () => !document.getElementById('pg-who').hidden && document.querySelectorAll('#pg-gateway option').length > 0,
          undefined, { what: `signed in through ${which}` });
        const cookies = (await context.cookies(base)).map((c) => ({ name: c.name, secure: c.secure, httpOnly: c.httpOnly, sameSite: c.sameSite, path: c.path }));
        assert.deepEqual(cookies, [{ name: '__Host-ratatoskr_admin_session', secure: true, httpOnly: true, sameSite: 'Strict', path: '/' }]);
        const cookie = (await context.cookies(base)).map((c) => `${c.name}=${c.value}`).join('; ');

        // A mint, and a chat through the same-origin pass-through, both on the cookie.
        await page.selectOption('#pg-gateway', 'gw_acme_main');
        await page.click('#pg-mint');
        await h.waitFor(page, () => /expires in/.test(document.getElementById('pg-token-state').textContent), undefined, { what: 'the minted token' });
        await page.fill('#pg-draft', `hello through ${which}`);
        await page.focus('#pg-draft');
        await page.keyboard.press('Enter');
        await h.waitFor(page, () => {
          const t = [...document.querySelectorAll('#pg-chat .msg.assistant')].pop();
          return t && (t.querySelector('.status-line') || t.querySelector('.pg-state'));
        }, undefined, { timeout: 20_000, what: 'the chat turn' });
        const chat = await page.evaluate(() => {
          const t = [...document.querySelectorAll('#pg-chat .msg.assistant')].pop();
          const line = t.querySelector('.status-line');
          return { status: line && line.textContent, reply: t.querySelector('.text') && t.querySelector('.text').textContent };
        });
        assert.ok(chat.status && chat.status.startsWith('done'), JSON.stringify(chat));
        assert.match(chat.reply, new RegExp(`hello through ${which.replace(/[()]/g, '\\$&')}`));
        assert.ok(statuses.some(([m, p, s]) => m === 'POST' && p === '/admin/v1/playground/token' && s === 200), 'the mint answered 200');
        assert.ok(statuses.some(([m, p, s]) => m === 'POST' && /^\/admin\/v1\/gw\/acme\/main\/v1\/chat\/completions$/.test(p) && s === 200),
          'the pass-through answered 200');

        // The console, opened by that session; a turn whose events leave the app 400 ms apart.
        await page.goto(base + '/#console');
        await page.reload();
        await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
        const sessionId = await h.startSession(page, 'spread');
        await h.waitFor(page, () => document.querySelectorAll('#admin-events li').length >= 2, undefined, { timeout: 15_000, what: 'the admin events' });
        assert.ok(mock.admin.open >= 1, 'the admin events arrived while their stream was still open');
        await h.sendWithEnter(page, 'spread');
        assert.equal((await h.waitForTerminal(page)).kind, 'done');
        const { buffering, serverSpan, browserSpan } = await page.evaluate(() => {
          const s = window.ratatoskrConsole.flight.buildExport();
          const turn = s.turns[s.turns.length - 1];
          const t = window.ratatoskrConsole.flight.turnTimeline(turn);
          const seen = turn.events.map((e) => e.browser_ms).filter(Number.isFinite);
          return { buffering: t.buffering, serverSpan: t.server_span_ms, browserSpan: Math.max(...seen) - Math.min(...seen) };
        });
        // The app relayed the events over 1.6 s and the browser got them as spread.
        assert.ok(buffering.stamped >= 5 && serverSpan >= 1500, `the detector had a turn to judge: ${serverSpan} ms, ${JSON.stringify(buffering)}`);
        assert.ok(browserSpan >= 1000, `the browser received the turn over ${browserSpan} ms`);
        assert.equal(buffering.buffered, false, `streamed, not held: ${JSON.stringify(buffering)}`);
        assert.equal(await page.$('.buffering-warning'), null, 'the buffering detector stayed quiet');
        const rec = await h.record(page);
        assert.deepEqual(rec.cspViolations, []);
        assert.deepEqual(problems, { pageErrors: [], consoleErrors: [], dialogs: [] });

        // From another site, with the cookie the browser holds: refused, nothing written.
        // (A form's POST, the one write a foreign page can send without a preflight.)
        const foreign = { cookie, origin: 'https://attacker.example', 'content-type': 'application/json' };
        const form = { ...foreign, 'content-type': 'application/x-www-form-urlencoded' };
        const cancel = await request(proxy.port, 'POST', `/api/sessions/${sessionId}/turns/t_1/cancel`, form, 'a=1');
        assert.equal(cancel.status, 403, cancel.text);
        assert.equal(cancel.json.error_code, 'cross_origin_rejected');
        const mint = await request(proxy.port, 'POST', '/admin/v1/playground/token', foreign, JSON.stringify({ gateway_id: 'gw_acme_main' }));
        assert.equal(mint.status, 403, mint.text);
        assert.equal(mint.json.error_code, 'csrf_rejected');
        // A client's own X-Forwarded-Host is replaced by the proxy, so it cannot name another host.
        const config = await request(proxy.port, 'GET', '/api/config', { cookie, 'x-forwarded-host': 'rebind.attacker.example' });
        assert.equal(config.status, 200, config.text);
        const me = await request(proxy.port, 'GET', '/admin/v1/auth/me', { cookie });
        assert.equal(me.status, 200, 'the session is still there');
      } finally {
        await context.close();
      }
    });
  }
});
