'use strict';
// The console on a LAN host, in a real browser: a page whose DNS name was
// rebound to the console's address gets nothing but the typed refusal, and a
// console with console_access = "signed-in" opens only to a Playground session
// of the chosen role, through the same cookie the Playground view sets.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const h = require('./lib/harness');

const DEMO_PASSWORD = 'pw-' + crypto.randomBytes(8).toString('hex');
// Chromium's resolver plays the attacker's DNS: these names answer with loopback.
const REBIND = 'rebind.attacker.test';
const LISTED = 'console.lan.test';

describe('the console on a LAN host', () => {
  let browser, open, closed;

  h.suiteSetup(async (own) => {
    const common = { seed_demo_data: 'true', demo_password: DEMO_PASSWORD, admin_key: h.randomKey(), allowed_hosts: LISTED };
    open = own(await h.startHost({ variables: common }));
    closed = own(await h.startHost({ variables: { ...common, admin_key: h.randomKey(), console_access: 'signed-in', console_role: 'member' } }));
    browser = own(await h.launchBrowser({ args: [`--host-resolver-rules=MAP ${REBIND} 127.0.0.1, MAP ${LISTED} 127.0.0.1`] }));
  });

  test('a rebound name gets only 421 host_not_allowed; a listed name is the console', async () => {
    const port = new URL(open.url).port;
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const response = await page.goto(`http://${REBIND}:${port}/`);
      assert.equal(response.status(), 421);
      assert.equal(JSON.parse(await response.text()).error_code, 'host_not_allowed');
      // The rebinding page's own script, same-origin with the rebound name, reads nothing either.
      const answers = await page.evaluate(async () => {
        const config = await fetch('/api/config');
        const login = await fetch('/admin/v1/auth/login', {
          method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: 'platform@demo.test', password: 'guess' }),
        });
        return [config.status, (await config.json()).error_code, login.status, (await login.json()).error_code];
      });
      assert.deepEqual(answers, [421, 'host_not_allowed', 421, 'host_not_allowed']);
      // The name the operator listed is served: the console loads its agents.
      const listed = await h.openConsole(browser, `http://${LISTED}:${port}`);
      await h.assertClean(assert, listed.page, listed.problems);
      await listed.context.close();
    } finally {
      await context.close();
    }
  });

  test('signed-in console access: refused with a hint, then opened by a session of the role', async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(closed.url + '/');
      await h.waitFor(page, () => /console_sign_in_required/.test(document.getElementById('config-status').textContent),
        undefined, { what: 'the sign-in refusal' });
      assert.match(await page.textContent('#config-status'), /sign in under Playground/);
      assert.equal(await page.$$eval('#agent-select option', (o) => o.length), 0);
      const signIn = async (email) => {
        await page.goto(closed.url + '/#playground');
        await h.waitFor(page, () => !document.getElementById('pg-login-form').hidden, undefined, { what: 'the sign-in form' });
        await page.fill('#pg-email', email);
        await page.fill('#pg-password', DEMO_PASSWORD);
        await page.click('#pg-login');
        await h.waitFor(page, () => !document.getElementById('pg-who').hidden, undefined, { what: `signed in as ${email}` });
      };
      // A viewer is below the console's role.
      await signIn('viewer@acme.test');
      await page.goto(closed.url + '/#console');
      await page.reload();
      await h.waitFor(page, () => /console_role_required/.test(document.getElementById('config-status').textContent),
        undefined, { what: 'the role refusal' });
      await page.goto(closed.url + '/#playground');
      await page.reload();
      await page.click('#pg-signout');
      await h.waitFor(page, () => !document.getElementById('pg-login-form').hidden, undefined, { what: 'signed out' });
      // An admin opens it: the Playground's cookie (Path=/) reaches /api.
      await signIn('admin@acme.test');
      await page.goto(closed.url + '/#console');
      await page.reload();
      await page.waitForFunction(() => document.querySelectorAll('#agent-select option').length > 0);
      await h.startSession(page, 'sindra');
      await h.sendWithEnter(page, 'hello from the LAN');
      await h.waitFor(page, () => {
        const msgs = document.querySelectorAll('#transcript .msg.assistant');
        const last = msgs[msgs.length - 1];
        return last && last.querySelector('.status-line') && !window.ratatoskrConsole.state.turnRunning;
      }, undefined, { timeout: 30_000, what: 'the turn to end' });
      const line = await page.$eval('#transcript .msg.assistant:last-of-type .status-line', (l) => l.className + ' ' + l.textContent);
      assert.match(line, /\bdone\b/, line);
      // Signed out, the console closes again.
      const after = await page.evaluate(async () => {
        await fetch('/admin/v1/auth/logout', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        const r = await fetch('/api/config');
        return [r.status, (await r.json()).error_code];
      });
      assert.deepEqual(after, [401, 'console_sign_in_required']);
    } finally {
      await context.close();
    }
  });
});
