'use strict';
// Every command the README shows in its ```sh blocks is one the tests run.
// The README's commands are read from README.md, never copied here, and each
// must be one of:
// - `scripts/test.sh`: the command that runs this file; checked by reading that
//   scripts/test.sh runs `cargo test` (unit and component tests) and
//   `node --test` over tests/browser/ (the browser tests, this file among them);
// - `scripts/serve.sh [args]`, with any `VAR=value` before it: run here as the
//   README writes it (through bash, from the repository's root), the listen
//   port alone changed to 0 (a free one: 3000 may be taken on a shared
//   machine; without `--listen`, `--listen 127.0.0.1:0` is added, the default
//   address), with the app's state in a scratch directory. It must build and
//   serve the console on the simulator (the page, a turn streamed to its end,
//   the admin panes configured by the key serve.sh generated, that key in no
//   log line), and seed the demo users with the README's SPIN_VARIABLE_DEMO_PASSWORD,
//   or else with the random password it prints; with SPIN_VARIABLE_ALLOWED_HOSTS,
//   the listed name is served and any other is refused with 421.
// Any other command fails this test until a test runs it. The quick-start
// commands and the LAN command must be among them.
// serve.sh always runs the repo's host, so the other lanes skip this file.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const h = require('./lib/harness');

const README = path.join(h.REPO_ROOT, 'README.md');
const TEST_SH = path.join(h.REPO_ROOT, 'scripts', 'test.sh');

/** The README's ```sh blocks as commands: continuation lines joined, comments dropped. */
function readmeCommands(markdown) {
  const commands = [];
  const blocks = markdown.replace(/\r\n?/g, '\n').matchAll(/^```sh\n([\s\S]*?)^```$/gm);
  for (const [, body] of blocks) {
    for (const line of body.replace(/\\\n/g, ' ').split('\n')) {
      const command = stripComment(line).replace(/\s+/g, ' ').trim();
      if (command) commands.push(command);
    }
  }
  return commands;
}

/** The line up to an unquoted `#` that starts a word. */
function stripComment(line) {
  let quote = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) { if (c === quote) quote = null; } else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) return line.slice(0, i);
  }
  return line;
}

/** Shell words (single and double quotes, no expansions): enough to read env and args. */
function words(command) {
  const out = [];
  for (const m of command.matchAll(/(?:[^\s'"]+|'[^']*'|"[^"]*")+/g)) out.push(m[0].replace(/'([^']*)'|"([^"]*)"/g, '$1$2'));
  return out;
}

/** `{ env, program, args }` of a command: leading NAME=value words are its environment. */
function parse(command) {
  const w = words(command);
  const env = {};
  while (w.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(w[0])) {
    const [name, ...value] = w.shift().split('=');
    env[name] = value.join('=');
  }
  return { env, program: w[0], args: w.slice(1) };
}

/** The README's command with only its listen port set to 0. */
function onFreePort(command) {
  if (/--listen[ =]/.test(command)) {
    const changed = command.replace(/(--listen[ =]\S+):\d+/, '$1:0');
    assert.notEqual(changed, command, `no port to change in: ${command}`);
    return changed;
  }
  return command + ' --listen 127.0.0.1:0';
}

/** One HTTP request with a Host header of the caller's choosing. */
function request(url, { method = 'GET', host, headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method,
      headers: { ...(host ? { host } : {}), ...(body ? { 'content-type': 'application/json' } : {}), ...headers } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(60_000, () => req.destroy(new Error(`${method} ${url}: no answer in 60 s`)));
    req.on('error', reject);
    req.end(body ? JSON.stringify(body) : undefined);
  });
}

/** The pids of `pgid`'s process group, from /proc. */
function groupPids(pgid) {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid;
    } catch (_) { return false; }
  });
}

/** The environment of the host process that serve.sh exec'd, in `pgid`'s group. */
function hostEnvironment(pgid) {
  for (const pid of groupPids(pgid)) {
    try {
      if (path.basename(fs.readlinkSync(`/proc/${pid}/exe`)) !== 'ratatoskr-host') continue;
      const pairs = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
      return Object.fromEntries(pairs.map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
    } catch (_) { /* gone, or not ours */ }
  }
  throw new Error(`no ratatoskr-host process in group ${pgid}`);
}

/**
 * Runs `command` through bash from the repository's root, with no SPIN_VARIABLE_*
 * of the caller's and the state in a scratch directory; resolves once it serves.
 */
async function runServe(command) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratatoskr-readme-'));
  const runtimeConfig = path.join(dir, 'runtime-config.toml');
  fs.writeFileSync(runtimeConfig, `[key_value_store.default]\ntype = "spin"\npath = "${dir}/kv.db"\n\n` +
    `[sqlite_database.default]\ntype = "spin"\npath = "${dir}/db.db"\n`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SPIN_VARIABLE_')));
  env.RATATOSKR_RUNTIME_CONFIG = runtimeConfig;
  const proc = spawn('bash', ['-c', command], { cwd: h.REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const log = [];
  let exited = null;
  const gone = new Promise((resolve) => proc.once('exit', (code, signal) => { exited = code ?? signal; resolve(); }));
  const url = await new Promise((resolve, reject) => {
    // serve.sh builds first: a no-op after scripts/test.sh's build, minutes after an edit.
    const timer = setTimeout(() => reject(new Error(`not serving after 15 min:\n${log.join('\n')}`)), 15 * 60_000);
    let buffer = '';
    const onData = (chunk) => {
      buffer += chunk.toString('utf8');
      const lines = buffer.split('\n');
      buffer = lines.pop();
      for (const line of lines) {
        log.push(line);
        const m = /^Serving (http:\/\/\S+)/.exec(line);
        if (m) { clearTimeout(timer); resolve(m[1]); }
      }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    gone.then(() => { clearTimeout(timer); reject(new Error(`exited (${exited}) before serving:\n${log.join('\n')}`)); });
  });
  return {
    url,
    log,
    pgid: proc.pid,
    async stop() {
      if (exited === null) {
        try { process.kill(-proc.pid, 'SIGINT'); } catch (_) { /* gone */ }
        const t = setTimeout(() => { try { process.kill(-proc.pid, 'SIGKILL'); } catch (_) { /* gone */ } }, 5000);
        await gone;
        clearTimeout(t);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** This machine's first non-loopback IPv4 address, if it has one (a LAN client). */
function lanAddress() {
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list || []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return null;
}

/** What a quick-start or LAN `serve.sh` command must do, checked on the running app. */
async function checkServe(command) {
  const { env } = parse(command);
  const app = await runServe(onFreePort(command));
  try {
    const port = new URL(app.url).port;
    const listed = (env.SPIN_VARIABLE_ALLOWED_HOSTS || '').split(/[\s,]+/).filter(Boolean);
    // Beyond loopback when the command binds beyond it and this machine has an address there.
    const reach = !app.url.startsWith('http://127.') && lanAddress() ? lanAddress() : '127.0.0.1';
    const base = `http://${reach}:${port}`;
    const host = listed.length ? `${listed[0]}:${port}` : undefined;

    const page = await request(base + '/', { host });
    assert.equal(page.status, 200, page.text);
    assert.match(page.headers['content-type'], /^text\/html/);
    assert.match(page.text, /<script type="module" src="\/js\/main\.js"/);
    if (listed.length) {
      const foreign = await request(base + '/', { host: `rebind.attacker.test:${port}` });
      assert.equal(foreign.status, 421);
      assert.equal(JSON.parse(foreign.text).error_code, 'host_not_allowed');
    }

    // The console on the built-in simulator, its admin panes configured.
    const config = JSON.parse((await request(base + '/api/config', { host })).text);
    assert.equal(config.admin_configured, true, JSON.stringify(config));
    assert.ok(config.agents.some((a) => a.agent_id === 'sindra'), JSON.stringify(config));
    const agent = 'sindra';
    const session = await request(base + '/api/sessions', { method: 'POST', host, body: { agent_id: agent } });
    assert.equal(session.status, 201, session.text);
    const id = JSON.parse(session.text).session_id;
    const turn = await request(`${base}/api/sessions/${id}/turns`, { method: 'POST', host, body: { text: 'hello' } });
    assert.equal(turn.status, 200, turn.text);
    assert.match(turn.text, /^event: turn\.started$/m);
    assert.match(turn.text, /^event: done$/m);

    // The demo users: the README's password, else the one printed for this database.
    let password = env.SPIN_VARIABLE_DEMO_PASSWORD;
    if (!password) {
      // The Playground seeds on its first request from loopback, and prints the password once.
      assert.equal((await request(base + '/admin/v1/auth/me', { host })).status, 401);
      const printed = () => app.log.map((l) => /sign in with the password (\S+) /.exec(l)).find(Boolean);
      for (let i = 0; i < 100 && !printed(); i++) await h.sleep(50);
      assert.ok(printed(), 'no generated demo password in the log:\n' + app.log.slice(-20).join('\n'));
      password = printed()[1];
    }
    const login = await request(base + '/admin/v1/auth/login', { method: 'POST', host, body: { email: 'admin@acme.test', password } });
    assert.equal(login.status, 200, login.text);
    const cookie = /^[^;]+/.exec(login.headers['set-cookie'][0])[0];
    const me = JSON.parse((await request(base + '/admin/v1/auth/me', { host, headers: { cookie } })).text);
    assert.equal(me.user.email, 'admin@acme.test', JSON.stringify(me));

    // serve.sh's fresh admin key reached the server, and no log line.
    const key = hostEnvironment(app.pgid).SPIN_VARIABLE_ADMIN_KEY;
    assert.ok(key && key.length >= 16, 'serve.sh set no admin key');
    assert.ok(!app.log.some((l) => l.includes(key)), 'the admin key is in the log');
    return { reach, port };
  } finally {
    await app.stop();
  }
}

describe("the README's commands", { skip: h.skipWhen(Boolean(process.env.RATATOSKR_TEST_RUNTIME), "readme-commands: runs scripts/serve.sh, which serves on the repo's host") }, () => {
  const commands = readmeCommands(fs.readFileSync(README, 'utf8'));

  test('each is one this file runs or checks, and the quick start and the LAN command are there', () => {
    const programs = commands.map((c) => parse(c).program);
    const unknown = commands.filter((c, i) => !['scripts/serve.sh', 'scripts/test.sh'].includes(programs[i]));
    assert.deepEqual(unknown, [], 'README commands no test runs');
    assert.ok(commands.includes('scripts/serve.sh'), commands.join('\n'));
    assert.ok(commands.includes('scripts/test.sh'), commands.join('\n'));
    assert.ok(commands.some((c) => {
      const { env, program, args } = parse(c);
      return program === 'scripts/serve.sh' && env.SPIN_VARIABLE_ALLOWED_HOSTS && env.SPIN_VARIABLE_DEMO_PASSWORD &&
        args[0] === '--listen' && !args[1].startsWith('127.');
    }), 'no LAN command (serve.sh --listen beyond loopback, with allowed hosts and a demo password):\n' + commands.join('\n'));
  });

  test('scripts/test.sh runs the unit, component and browser tests, this file among them', () => {
    const script = fs.readFileSync(TEST_SH, 'utf8');
    const lines = script.split('\n').filter((l) => !l.trim().startsWith('#'));
    assert.ok(lines.some((l) => /^\s*cargo test "\$\{NATIVE\[@\]\}" "\$@"/.test(l)), 'test.sh runs no cargo test over the workspace');
    assert.ok(lines.some((l) => /^\s*node --test .*\btests\/browser\/(\s|$)/.test(l)), 'test.sh runs no node --test over tests/browser/');
  });

  for (const command of commands.filter((c) => parse(c).program === 'scripts/serve.sh')) {
    test(`runs: ${command}`, async () => {
      await checkServe(command);
    });
  }
});
