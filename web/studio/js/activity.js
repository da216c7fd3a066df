// Activity: the upstream call log (GET /v1/activity), newest first.

import { call } from './api.js';
import { banner, bytes, errorText, h, loading } from './dom.js';

const LIMIT = 100;
const AUTO_MS = 5000;

function two(n, w = 2) {
  return String(n).padStart(w, '0');
}

// when is a record's time: the clock time, with the date when not today.
function when(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso || '';
  const time = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${two(d.getMilliseconds(), 3)}`;
  const now = new Date();
  const sameDay = d.toDateString() === now.toDateString();
  return sameDay ? time : `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${time}`;
}

function statusCell(a) {
  let cls = 'st-ok';
  if (!a.status || a.status >= 500) cls = 'st-err';
  else if (a.status >= 400) cls = 'st-warn';
  else if (a.status >= 300) cls = 'st-info';
  return h('td', { class: 'num' },
    h('span', { class: ['status', cls], title: a.error || null }, a.status ? String(a.status) : 'failed'),
    a.retry ? h('span', { class: 'muted' }, ` retry ${a.retry}`) : null);
}

export function activityView() {
  const filter = h('input', { id: 'activity-filter', class: 'input', type: 'search', placeholder: 'tool, path, status…', autocomplete: 'off', 'aria-controls': 'activity-table' });
  const auto = h('input', { id: 'activity-auto', type: 'checkbox' });
  const refresh = h('button', { type: 'button', class: 'button small', id: 'activity-refresh' }, 'Refresh');
  const count = h('p', { class: 'muted count', role: 'status' });
  const msg = h('div');
  const tbody = h('tbody');
  const el = h('section', { class: 'activity', 'aria-labelledby': 'activity-title' },
    h('div', { class: 'view-head' }, h('h1', { id: 'activity-title' }, 'Activity'),
      h('p', { class: 'muted' }, `The last ${LIMIT} upstream calls, newest first. Credentials and query secrets are never recorded.`)),
    h('div', { class: 'toolbar' },
      h('div', { class: 'field grow' }, h('label', { class: 'field-label', for: 'activity-filter' }, 'Filter'), filter),
      h('div', { class: 'check' }, auto, h('label', { for: 'activity-auto' }, 'Refresh every 5 s')),
      refresh),
    count, msg,
    h('div', { class: 'table-wrap' },
      h('table', { class: 'table activity-table', id: 'activity-table' },
        h('caption', { class: 'sr-only' }, 'Upstream calls, newest first'),
        h('thead', null, h('tr', null,
          ['Time', 'Tool', 'Method', 'Path', 'Status', 'Page', 'Bytes', 'ms'].map((c, i) => h('th', { scope: 'col', class: i >= 4 ? 'num' : null }, c)))),
        tbody)));

  let records = [];
  let timer = 0;
  let busy = false;

  function render() {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = records.filter((a) => {
      const text = [a.tool, a.method, a.path, a.status, a.error, a.threadId].filter((x) => x !== undefined).join(' ').toLowerCase();
      return words.every((w) => text.includes(w));
    });
    count.textContent = records.length ? `${shown.length} of ${records.length} calls` : '';
    if (!records.length) {
      tbody.replaceChildren(h('tr', null, h('td', { colspan: '8', class: 'empty' }, 'No upstream calls yet. Run a tool in Tools → Try it, or chat with an agent.')));
      return;
    }
    tbody.replaceChildren(...shown.map((a) => h('tr', null,
      h('td', { class: 'time' }, h('time', { datetime: a.time, title: a.time }, when(a.time))),
      h('td', null, h('code', null, a.tool)),
      h('td', null, h('code', { class: 'method' }, a.method)),
      h('td', { class: 'path' }, h('code', { title: a.path }, a.path), a.error ? h('span', { class: 'inline-error small' }, a.error) : null),
      statusCell(a),
      h('td', { class: 'num' }, a.page ? String(a.page) : ''),
      h('td', { class: 'num', title: `${a.bytes} bytes` }, bytes(a.bytes)),
      h('td', { class: 'num' }, String(a.durationMs ?? '')))));
  }

  async function load() {
    if (busy) return;
    busy = true;
    refresh.disabled = true;
    if (!records.length) msg.replaceChildren(loading('activity'));
    try {
      const r = await call('GET', `activity?limit=${LIMIT}`);
      records = r.data.activity || [];
      msg.replaceChildren();
      render();
    } catch (err) {
      msg.replaceChildren(banner('error', `Could not load the activity: ${errorText(err)}`));
    } finally {
      busy = false;
      refresh.disabled = false;
    }
  }

  filter.addEventListener('input', render);
  refresh.addEventListener('click', load);
  auto.addEventListener('change', () => {
    clearInterval(timer);
    timer = auto.checked ? setInterval(load, AUTO_MS) : 0;
  });

  return {
    el,
    update: load,
    destroy: () => clearInterval(timer),
  };
}
