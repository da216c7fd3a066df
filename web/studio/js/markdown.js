// A small Markdown renderer for the agent's answers: paragraphs, bullet
// lists, pipe tables, **bold**, *emphasis* and `code`. It builds DOM
// nodes (never HTML), so nothing the model writes can become markup.

import { h } from './dom.js';

const INLINE = /\*\*([^*]+)\*\*|`([^`]+)`|\*([^*\s][^*]*)\*/g;

function inline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined) out.push(h('strong', null, m[1]));
    else if (m[2] !== undefined) out.push(h('code', null, m[2]));
    else out.push(h('em', null, m[3]));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|')) s = s.slice(0, -1);
  return s.split('|').map((c) => c.trim());
}

const SEPARATOR = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

// markdown renders text as a fragment of block elements.
export function markdown(text) {
  const blocks = [];
  const lines = String(text).split('\n');
  let para = [];
  const flush = () => {
    if (para.length) blocks.push(h('p', null, para.flatMap((l, i) => (i ? [h('br'), ...inline(l)] : inline(l)))));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.trim().startsWith('|') && i + 1 < lines.length && SEPARATOR.test(lines[i + 1])) {
      flush();
      const head = cells(line);
      const rows = [];
      i += 2;
      while (i < lines.length && lines[i].trim().startsWith('|')) rows.push(cells(lines[i++]));
      i--;
      blocks.push(h('div', { class: 'table-wrap' }, h('table', { class: 'table md-table' },
        h('thead', null, h('tr', null, head.map((c) => h('th', { scope: 'col' }, inline(c))))),
        h('tbody', null, rows.map((r) => h('tr', null, r.map((c) => h('td', null, inline(c)))))))));
    } else if (/^\s*[-*] /.test(line)) {
      flush();
      const items = [];
      while (i < lines.length && /^\s*[-*] /.test(lines[i])) items.push(lines[i++].replace(/^\s*[-*] /, ''));
      i--;
      blocks.push(h('ul', null, items.map((it) => h('li', null, inline(it)))));
    } else if (line.trim() === '') {
      flush();
    } else {
      para.push(line);
    }
  }
  flush();
  return blocks;
}
