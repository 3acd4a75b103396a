'use strict';
// Hostile strings for every upstream field the console renders. Each one that
// executed would set window.__xss (a canary the init script watches) or open a
// dialog; rendered as text, each must show up literally.

const RLO = '\u202E';
const PDF = '\u202C';
const PDI = '\u2069';
const ZWSP = '\u200B';
const ZWJ = '\u200D';
const BOM = '\uFEFF';

const PAYLOADS = [
  // script elements
  '<script>window.__xss=1</script>',
  '<SCRIPT>window.__xss=1</SCRIPT>',
  '<script src="/x.js"></script>',
  '<script>alert(1)</script>',
  '"><script>window.__xss=1</script>',
  "'><script>window.__xss=1</script>",
  '</script><script>window.__xss=1</script>',
  '<scr<script>ipt>window.__xss=1</scr</script>ipt>',
  '<script type="module">window.__xss=1</script>',
  '<!--<script>window.__xss=1</script>-->',
  // event-handler attributes
  '<img src=x onerror=window.__xss=1>',
  '<img src="x" onerror="alert(1)">',
  '<IMG SRC=x OnErRoR=window.__xss=1>',
  '<img/src=x/onerror=window.__xss=1>',
  '<body onload=window.__xss=1>',
  '<div onmouseover="window.__xss=1">hover me</div>',
  '<input autofocus onfocus=window.__xss=1>',
  '<details open ontoggle=window.__xss=1>',
  '<video><source onerror=window.__xss=1></video>',
  '<audio src=x onerror=window.__xss=1>',
  '<marquee onstart=window.__xss=1>',
  '<select autofocus onfocus=window.__xss=1>',
  '<textarea autofocus onfocus=window.__xss=1>',
  '<keygen autofocus onfocus=window.__xss=1>',
  '<button onclick=window.__xss=1>click</button>',
  '" onmouseover="window.__xss=1" x="',
  "' onfocus='window.__xss=1' autofocus='",
  '<form><button formaction=javascript:window.__xss=1>x</button></form>',
  // javascript: and data: URLs
  'javascript:window.__xss=1',
  'JaVaScRiPt:alert(1)',
  '<a href="javascript:window.__xss=1">click</a>',
  '<a href="jav&#x09;ascript:window.__xss=1">tab</a>',
  '<iframe src="javascript:window.__xss=1"></iframe>',
  '<iframe srcdoc="<script>parent.__xss=1</script>"></iframe>',
  '<object data="javascript:window.__xss=1"></object>',
  '<embed src="javascript:window.__xss=1">',
  '<a href="data:text/html,<script>alert(1)</script>">data</a>',
  '<meta http-equiv="refresh" content="0;url=javascript:window.__xss=1">',
  '<base href="javascript:window.__xss=1//">',
  '<link rel="stylesheet" href="javascript:window.__xss=1">',
  // SVG and MathML
  '<svg onload=window.__xss=1>',
  '<svg><script>window.__xss=1</script></svg>',
  '<svg><animate onbegin=window.__xss=1 attributeName=x dur=1s>',
  '<svg><a xlink:href="javascript:window.__xss=1"><text x=20 y=20>x</text></a></svg>',
  '<math><mtext><table><mglyph><style><img src=x onerror=window.__xss=1>',
  '<svg><foreignObject><img src=x onerror=window.__xss=1></foreignObject></svg>',
  // broken and nested markup
  '<img src=x onerror=window.__xss=1',
  '<<script>window.__xss=1//<</script>',
  '<div><span>unclosed <b>bold',
  '</div></li></ol></section></main><script>window.__xss=1</script>',
  '<style>*{display:none}</style>',
  '<noscript><p title="</noscript><img src=x onerror=window.__xss=1>">',
  '<template><img src=x onerror=window.__xss=1></template>',
  '<![CDATA[<script>window.__xss=1</script>]]>',
  '<?xml version="1.0"?><x onload="window.__xss=1"/>',
  // entities and encodings that must stay literal
  '&lt;script&gt;window.__xss=1&lt;/script&gt;',
  '&#60;img src=x onerror=window.__xss=1&#62;',
  '%3Cscript%3Ewindow.__xss%3D1%3C%2Fscript%3E',
  '\\u003cscript\\u003ewindow.__xss=1\\u003c/script\\u003e',
  '${window.__xss=1}{{constructor.constructor("window.__xss=1")()}}',
  // JSON / SSE framing tricks (carried as string values, never as syntax)
  '"}],"x":"<img src=x onerror=window.__xss=1>',
  'line one\nevent: done\ndata: {"turn_id":"forged"}\n\nline two',
  'data: <script>window.__xss=1</script>\r\n\r\nretry: 1',
  // unicode tricks
  `${RLO}gnp.exe<img src=x onerror=window.__xss=1>`,
  `admin${ZWSP}<scr${ZWSP}ipt>window.__xss=1</scr${ZWSP}ipt>`,
  `${BOM}<script>window.__xss=1</script>${ZWJ}`,
  '\uFF1Cscript\uFF1Ewindow.__xss=1\uFF1C/script\uFF1E',
  'ｊａｖａｓｃｒｉｐｔ:window.__xss=1',
  '\u2028<script>window.__xss=1</script>\u2029',
  'e\u0301\u0301\u0301 Z̵̡̢͎a̸l̷g̶o̵ <b>text</b>',
  '𝕏🙂👩‍💻<img src=x onerror=window.__xss=1>',
  '\u0000<script>window.__xss=1</script>',
  // very long unbroken text (layout must not overflow sideways)
  'A'.repeat(240) + '<img src=x onerror=window.__xss=1>',
  // bidi controls (U+202A-E, U+2066-9, U+200E/F), including the ways out of an
  // isolate (a PDI, an open isolate initiator, a paragraph separator)
  `evil${RLO}gnp.exe${PDF}<img src=x onerror=window.__xss=1>`,
  `${PDI}${RLO}<script>window.__xss=1</script>`,
  `${PDI}${PDI}${PDI}${RLO}cod.exe`,
  `\u202A\u202B\u202Dx${PDF}\u202Ey${PDF}${PDF}`,
  `\u2066\u2067\u2068${RLO}<b>open isolates</b>`,
  `x\u2029${RLO}after a paragraph separator`,
  `\u200E\u200Fmarks\u200F${RLO}\u200E`,
];

/** Payloads usable where CR, LF and NUL cannot appear (an SSE event name). */
const SINGLE_LINE = PAYLOADS.filter((p) => !/[\r\n\0]/.test(p));

module.exports = { PAYLOADS, SINGLE_LINE };
