// A JSON viewer: pretty-printed and highlighted, collapsed when large,
// rendered only when opened, with a copy button.

import { bytes, h } from './dom.js';

// Open at once up to this many characters of pretty JSON.
const OPEN_MAX = 16 * 1024;
// Highlight up to this many; beyond, plain text (thousands of spans cost
// more than they help).
const HIGHLIGHT_MAX = 256 * 1024;
// Render up to this many until asked for the rest.
const RENDER_MAX = 1024 * 1024;

const TOKEN = /("(?:\\.|[^"\\])*")(\s*:)?|\b(?:true|false)\b|\bnull\b|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;

// highlight turns pretty JSON into text nodes and token spans.
export function highlight(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(TOKEN)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    let cls = 'j-num';
    if (m[1] !== undefined) cls = m[2] ? 'j-key' : 'j-str';
    else if (m[0] === 'true' || m[0] === 'false') cls = 'j-bool';
    else if (m[0] === 'null') cls = 'j-null';
    if (m[2]) out.push(h('span', { class: cls }, m[1]), m[2]);
    else out.push(h('span', { class: cls }, m[0]));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// jsonView shows a value under a summary line (label · size).
export function jsonView(label, value) {
  const pretty = JSON.stringify(value, null, 2) ?? String(value);
  const code = h('code', null);
  const pre = h('pre', { class: 'json', tabindex: '0' }, code);
  const more = h('button', { type: 'button', class: 'button small', hidden: true }, 'Show all');
  const copied = h('span', { class: 'hint', role: 'status' });
  const copy = h('button', {
    type: 'button', class: 'button small',
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(pretty);
        copied.textContent = 'Copied';
      } catch {
        copied.textContent = 'Copy is not available here; select the text instead.';
      }
    },
  }, 'Copy JSON');
  let rendered = false;
  const render = (all) => {
    const text = all || pretty.length <= RENDER_MAX ? pretty : pretty.slice(0, RENDER_MAX);
    code.replaceChildren(...(text.length <= HIGHLIGHT_MAX ? highlight(text) : [text]));
    more.hidden = text.length === pretty.length;
    if (!more.hidden) more.textContent = `Show all ${bytes(pretty.length)}`;
    rendered = true;
  };
  more.addEventListener('click', () => render(true));
  const details = h('details', { class: 'json-view', open: pretty.length <= OPEN_MAX },
    h('summary', null, label, h('span', { class: 'muted' }, ` · ${bytes(new TextEncoder().encode(pretty).length)}`,
      pretty.length > OPEN_MAX ? ' · collapsed, open to read' : '')),
    h('div', { class: 'json-tools' }, copy, more, copied),
    pre);
  details.addEventListener('toggle', () => {
    if (details.open && !rendered) render(false);
  });
  if (details.open) render(false);
  return details;
}
