'use strict';
// INV-004, statically: static/index.html has no HTML-string sink and nothing
// that evaluates strings as code, so upstream text can only reach the DOM as
// text. The checker is tested against samples first, so it can fail.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { INDEX_HTML } = require('./lib/harness');

const FORBIDDEN = [
  ['innerHTML', /\binnerHTML\b/],
  ['outerHTML', /\bouterHTML\b/],
  ['insertAdjacentHTML', /\binsertAdjacentHTML\b/],
  ['document.write', /\bdocument\s*\.\s*write(ln)?\b/],
  ['eval(', /\beval\s*\(/],
  ['new Function', /\bnew\s+Function\b/],
  ['Function(', /(^|[^.\w])Function\s*\(/],
  ['createContextualFragment', /\bcreateContextualFragment\b/],
  ['DOMParser', /\bDOMParser\b/],
  ['srcdoc', /\bsrcdoc\b/i],
  ['string timer', /\bset(Timeout|Interval)\s*\(\s*['"`]/],
  ['javascript: URL', /javascript:/i],
  ['inline event-handler attribute', /<[a-z][^>]*\son[a-z]+\s*=/i],
  ['inline style attribute', /<[a-z][^>]*\sstyle\s*=/i],
  ['event handler set as an attribute', /setAttribute\s*\(\s*['"`]on/i],
  ['event handler passed to el()', /[{,]\s*['"]?on[a-z]+['"]?\s*:/],
];

function sinks(source) {
  return FORBIDDEN.filter(([, re]) => re.test(source)).map(([name]) => name);
}

test('the sink checker finds every forbidden construct in samples', () => {
  const samples = {
    innerHTML: 'node.innerHTML = text;',
    outerHTML: 'node.outerHTML = x',
    insertAdjacentHTML: "node.insertAdjacentHTML('beforeend', x)",
    'document.write': 'document.write(x)',
    'eval(': 'eval (code)',
    'new Function': "new Function('return 1')",
    'Function(': "const f = Function('a', 'return a');",
    createContextualFragment: 'range.createContextualFragment(html)',
    DOMParser: 'new DOMParser().parseFromString(x, "text/html")',
    srcdoc: 'frame.srcdoc = x',
    'string timer': "setTimeout('doIt()', 5)",
    'javascript: URL': 'a.href = "javascript:void 0"',
    'inline event-handler attribute': '<button onclick="go()">',
    'inline style attribute': '<div style="color:red">',
    'event handler set as an attribute': "node.setAttribute('onclick', code)",
    'event handler passed to el()': "el('img', { onerror: code })",
  };
  for (const [name, sample] of Object.entries(samples)) {
    assert.ok(sinks(sample).includes(name), `${name} not detected in ${sample}`);
  }
  assert.deepEqual(sinks("node.textContent = text; el('div', { class: 'x', text }); es.onopen = () => {}; clearTimeout(t);"), []);
});

test('static/index.html has no HTML-string sink, eval, or inline handler', () => {
  const html = fs.readFileSync(INDEX_HTML, 'utf8');
  assert.deepEqual(sinks(html), []);
});

test('static/index.html loads nothing from elsewhere and has exactly one inline script', () => {
  const html = fs.readFileSync(INDEX_HTML, 'utf8');
  const scripts = html.match(/<script\b[^>]*>/gi) || [];
  assert.deepEqual(scripts, ['<script>'], 'one inline <script>, no src, no type tricks');
  assert.equal((html.match(/<style\b[^>]*>/gi) || []).length, 1, 'one inline <style>');
  assert.doesNotMatch(html, /\b(src|href|action)\s*=\s*["']?(https?:)?\/\//i, 'no external resources');
  assert.doesNotMatch(html, /@import|url\(\s*['"]?https?:/i, 'no external CSS');
});
