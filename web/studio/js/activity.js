// Activity: the upstream call log (GET /v1/activity) as a trace — each
// request under the tool call it served, each call under its chat turn,
// workflow run or Try-it session — filterable by agent, chat and tool.
// A chat's tool card links here with #/activity/agent=…&chat=…&call=….

import { call, seg } from './api.js';
import { banner, bytes, errorText, h, loading } from './dom.js';

const LIMIT = 1000;
const AUTO_MS = 5000;
// Chats whose threads are read to name the turn of each call.
const TURN_LOOKUPS = 12;

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

function dec(s) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

// origin says what a thread id belongs to: a chat (u=…;a=…;c=…), an MCP
// client's conversation (u=…;a=…;m=…), a workflow run (workflow:<run>), a Try-it session, or nothing.
export function origin(threadId) {
  if (!threadId) return { kind: 'direct', label: 'Calls outside any thread', agent: '', chat: '' };
  const m = /^u=([^;]*);a=([^;]*);([cm])=(.*)$/.exec(threadId);
  if (m) {
    const user = dec(m[1]);
    const agent = dec(m[2]);
    const chat = dec(m[4]);
    const kind = m[3] === 'c' ? 'chat' : 'mcp';
    const what = kind === 'chat' ? 'Chat' : 'MCP conversation';
    return { kind, label: `${what} ${chat} · agent ${agent}${user ? ` · user ${user}` : ''}`, agent, chat, user };
  }
  if (threadId.startsWith('workflow:')) return { kind: 'workflow', label: `Workflow run ${threadId.slice(9)}`, agent: '', chat: '' };
  if (threadId.startsWith('studio-try-')) return { kind: 'try', label: 'Try it (this console)', agent: '', chat: '' };
  return { kind: 'thread', label: `Thread ${threadId}`, agent: '', chat: '' };
}

function parseArg(arg) {
  const p = new URLSearchParams(arg || '');
  return { agent: p.get('agent') || '', chat: p.get('chat') || '', call: p.get('call') || '', tool: p.get('tool') || '' };
}

export function activityView() {
  const agentSel = h('select', { id: 'activity-agent', class: 'input' }, h('option', { value: '' }, 'all agents'));
  const chatIn = h('input', { id: 'activity-chat', class: 'input', type: 'search', placeholder: 'chat id', autocomplete: 'off' });
  const toolIn = h('input', { id: 'activity-tool', class: 'input', type: 'search', placeholder: 'tool', autocomplete: 'off' });
  const filter = h('input', { id: 'activity-filter', class: 'input', type: 'search', placeholder: 'path, status…', autocomplete: 'off', 'aria-controls': 'activity-trace' });
  const auto = h('input', { id: 'activity-auto', type: 'checkbox' });
  const refresh = h('button', { type: 'button', class: 'button small', id: 'activity-refresh' }, 'Refresh');
  const count = h('p', { class: 'muted count', role: 'status' });
  const msg = h('div');
  const trace = h('ol', { id: 'activity-trace', class: 'trace-list', 'aria-label': 'Upstream calls by thread and tool call' });
  const field = (label, el) => h('div', { class: 'field' }, h('label', { class: 'field-label', for: el.id }, label), el);
  const el = h('section', { class: 'activity', 'aria-labelledby': 'activity-title' },
    h('div', { class: 'view-head' }, h('h1', { id: 'activity-title' }, 'Activity'),
      h('p', { class: 'muted' }, `The last ${LIMIT} upstream calls as a trace: each request under its tool call, each call under its chat, workflow run or Try-it session. Credentials and query secrets are never recorded.`)),
    h('div', { class: 'toolbar' },
      field('Agent', agentSel), field('Chat', chatIn), field('Tool', toolIn),
      h('div', { class: 'field grow' }, h('label', { class: 'field-label', for: 'activity-filter' }, 'Filter'), filter),
      h('div', { class: 'check' }, auto, h('label', { for: 'activity-auto' }, 'Refresh every 5 s')),
      refresh),
    count, msg, trace);

  let records = [];
  let turns = new Map(); // toolCallId → {turn, tool}
  let titles = new Map(); // thread id → the chat's first question
  let focus = { call: '' };
  let timer = 0;
  let busy = false;

  function matches(a) {
    const o = origin(a.threadId);
    if (agentSel.value && o.agent !== agentSel.value) return false;
    if (chatIn.value.trim() && !o.chat.includes(chatIn.value.trim())) return false;
    if (toolIn.value.trim() && !a.tool.toLowerCase().includes(toolIn.value.trim().toLowerCase())) return false;
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const text = [a.tool, a.method, a.path, a.status, a.error, a.verdict, a.callId].filter((x) => x !== undefined).join(' ').toLowerCase();
    return words.every((w) => text.includes(w));
  }

  function requestTable(rows) {
    return h('div', { class: 'table-wrap' }, h('table', { class: 'table activity-table' },
      h('thead', null, h('tr', null,
        ['Time', 'Tool', 'Method', 'Path', 'Status', 'Page', 'Bytes', 'ms'].map((c, i) => h('th', { scope: 'col', class: i >= 4 ? 'num' : null }, c)))),
      h('tbody', null, rows.map((a) => h('tr', null,
        h('td', { class: 'time' }, h('time', { datetime: a.time, title: a.time }, when(a.time))),
        h('td', null, h('code', null, a.tool)),
        h('td', null, h('code', { class: 'method' }, a.method)),
        h('td', { class: 'path' }, h('code', { title: a.path }, a.path), a.error ? h('span', { class: 'inline-error small' }, a.error) : null,
          a.verdict ? h('span', { class: 'muted small' }, `cancelled by the client — ${a.verdict}`) : null),
        statusCell(a),
        h('td', { class: 'num' }, a.page ? String(a.page) : ''),
        h('td', { class: 'num', title: `${a.bytes} bytes` }, bytes(a.bytes)),
        h('td', { class: 'num' }, String(a.durationMs ?? '')))))));
  }

  function render() {
    const shown = records.filter(matches);
    count.textContent = records.length ? `${shown.length} of ${records.length} calls` : '';
    if (!records.length) {
      trace.replaceChildren(h('li', { class: 'empty muted' }, 'No upstream calls yet. Run a tool in Tools → Try it, or chat with an agent.'));
      return;
    }
    // Threads by their newest request; calls in the order they began.
    const threads = new Map();
    for (const a of shown) {
      const key = a.threadId || '';
      if (!threads.has(key)) threads.set(key, new Map());
      const calls = threads.get(key);
      const cid = a.callId || '';
      if (!calls.has(cid)) calls.set(cid, []);
      calls.get(cid).push(a);
    }
    trace.replaceChildren(...[...threads].map(([threadId, calls]) => {
      const o = origin(threadId);
      const n = [...calls.values()].reduce((s, r) => s + r.length, 0);
      const hit = focus.call && calls.has(focus.call);
      const callEls = [...calls].reverse().map(([cid, rows]) => {
        const asc = [...rows].reverse();
        const t = turns.get(cid);
        const ms = Math.max(0, new Date(rows[0].time) - new Date(asc[0].time)) + (rows[0].durationMs || 0);
        return h('section', { class: 'trace-call', dataset: { callId: cid, highlight: String(cid !== '' && cid === focus.call) } },
          h('h3', null, cid || '(requests without a tool call id)',
            h('span', { class: 'muted' }, ` · ${asc[0].tool}${t ? ` · turn ${t.turn + 1}` : ''} · ${rows.length} ${rows.length === 1 ? 'request' : 'requests'} · ${ms} ms`)),
          requestTable(asc));
      });
      return h('li', null, h('details', { class: 'trace-group', open: hit || threads.size <= 3, dataset: { thread: threadId, highlight: String(!!hit) } },
        h('summary', null, titles.has(threadId)
          ? [h('strong', { class: 'trace-title', title: titles.get(threadId) }, `“${titles.get(threadId)}”`), h('span', { class: 'muted trace-origin' }, o.label)]
          : h('strong', null, o.label),
          h('span', { class: 'muted' }, `${calls.size} ${calls.size === 1 ? 'tool call' : 'tool calls'} · ${n} ${n === 1 ? 'request' : 'requests'} · last ${when(shown.find((a) => (a.threadId || '') === threadId).time)}`)),
        callEls));
    }));
    const target = focus.call && trace.querySelector(`[data-call-id="${CSS.escape(focus.call)}"]`);
    if (target) target.scrollIntoView({ block: 'nearest' });
  }

  // nameTurns reads the threads of the chats on screen, to name each
  // tool call's turn and each chat by its first question.
  async function nameTurns() {
    const chats = new Map();
    for (const a of records) {
      const o = origin(a.threadId);
      if (o.kind === 'chat' && !o.user && matches(a)) chats.set(a.threadId, { ...o, threadId: a.threadId });
    }
    const todo = [...chats.values()].slice(0, TURN_LOOKUPS);
    await Promise.all(todo.map(async (o) => {
      try {
        const msgs = (await call('GET', `agents/${seg(o.agent)}/chats/${seg(o.chat)}`)).data || [];
        let turn = -1;
        const first = msgs.find((m) => m.role === 'user');
        const text = first ? (first.parts || []).filter((p) => p.type === 'text').map((p) => p.text).join(' ').trim() : '';
        if (text) titles.set(o.threadId, text.length > 90 ? `${text.slice(0, 89)}…` : text);
        for (const m of msgs) {
          if (m.role === 'user') turn += 1;
          for (const p of m.parts || []) if (p.toolCallId) turns.set(p.toolCallId, { turn: Math.max(turn, 0) });
        }
      } catch {
        // a thread not saved yet (its first turn is running): no names
      }
    }));
  }

  async function load() {
    if (busy) return;
    busy = true;
    refresh.disabled = true;
    if (!records.length) msg.replaceChildren(loading('activity'));
    try {
      const r = await call('GET', `activity?limit=${LIMIT}`);
      records = r.data.activity || [];
      const agents = new Set(records.map((a) => origin(a.threadId).agent).filter(Boolean));
      if (agentSel.value) agents.add(agentSel.value);
      const cur = agentSel.value;
      agentSel.replaceChildren(h('option', { value: '' }, 'all agents'), ...[...agents].sort().map((a) => h('option', { value: a }, a)));
      agentSel.value = cur;
      turns = new Map();
      titles = new Map();
      await nameTurns();
      msg.replaceChildren();
      render();
    } catch (err) {
      msg.replaceChildren(banner('error', `Could not load the activity: ${errorText(err)}`));
    } finally {
      busy = false;
      refresh.disabled = false;
    }
  }

  for (const x of [filter, chatIn, toolIn]) x.addEventListener('input', render);
  agentSel.addEventListener('change', render);
  refresh.addEventListener('click', load);
  auto.addEventListener('change', () => {
    clearInterval(timer);
    timer = auto.checked ? setInterval(load, AUTO_MS) : 0;
  });

  return {
    el,
    update(arg) {
      focus = parseArg(arg);
      if (focus.agent) {
        if (![...agentSel.options].some((o) => o.value === focus.agent)) agentSel.append(h('option', { value: focus.agent }, focus.agent));
        agentSel.value = focus.agent;
      }
      chatIn.value = focus.chat;
      toolIn.value = focus.tool;
      return load();
    },
    destroy: () => clearInterval(timer),
  };
}
