// Approvals: the inbox of calls that wait for a human's yes outside any
// chat (the invoke API with agent_id, MCP clients) — GET /v1/approvals —
// each with its evidence (what the call would do, its arguments, what was
// read before it), answered with Approve or Deny and an optional reason
// (POST /v1/approvals/{id}). A chat's own approvals are answered in the
// chat. #/approvals/<status> shows pending (default), approved, denied,
// used or all.

import { call, seg } from './api.js';
import { banner, effectBadge, errorText, h, loading } from './dom.js';

const AUTO_MS = 5000;
const STATUSES = ['pending', 'approved', 'denied', 'used', 'all'];
const LABELS = { pending: 'Waits for approval', approved: 'Approved, not run yet', denied: 'Denied', used: 'Approved and run' };
const PILLS = { pending: 'pill-waiting', approved: 'pill-running', denied: 'pill-failed', used: 'pill-complete' };

function stamp(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso || '' : d.toLocaleString();
}

// left says how long until iso, in words.
function left(iso) {
  const ms = new Date(iso) - Date.now();
  if (!(ms > 0)) return 'expired';
  const min = Math.round(ms / 60000);
  return min < 1 ? 'under a minute left' : min < 90 ? `${min} min left` : `${Math.round(min / 60)} h left`;
}

export function approvalsView({ navigate }) {
  const statusSel = h('select', { id: 'approvals-status', class: 'input' },
    STATUSES.map((s) => h('option', { value: s }, s === 'all' ? 'all' : s)));
  const auto = h('input', { id: 'approvals-auto', type: 'checkbox', checked: true });
  const refresh = h('button', { type: 'button', class: 'button small', id: 'approvals-refresh' }, 'Refresh');
  const count = h('p', { class: 'muted count', role: 'status', id: 'approvals-count' });
  const msg = h('div');
  const list = h('ol', { id: 'approvals-list', class: 'approvals-list', 'aria-label': 'Approval requests' });
  const el = h('section', { class: 'approvals', 'aria-labelledby': 'approvals-title' },
    h('div', { class: 'view-head' }, h('h1', { id: 'approvals-title' }, 'Approvals'),
      h('p', { class: 'muted' }, 'Calls that wait for a human\'s yes outside a chat: the invoke API with agent_id, and MCP clients. Each runs once, with the arguments shown, when the same call comes back after an approval; unanswered requests expire. A chat\'s own approvals are answered in the chat.')),
    h('div', { class: 'toolbar' },
      h('div', { class: 'field' }, h('label', { class: 'field-label', for: 'approvals-status' }, 'Show'), statusSel),
      h('div', { class: 'check' }, auto, h('label', { for: 'approvals-auto' }, 'Refresh every 5 s')),
      refresh),
    count, msg, list);

  let status = 'pending';
  let timer = 0;
  let busy = false;
  // Answers being typed survive a refresh: approval id → reason text.
  const reasons = new Map();

  function card(a) {
    const ev = a.evidence || {};
    const reason = h('input', { class: 'input', type: 'text', maxlength: '2000', placeholder: 'reason (optional)', 'aria-label': `Reason for ${a.id}`, value: reasons.get(a.id) || '' });
    reason.addEventListener('input', () => reasons.set(a.id, reason.value));
    const note = h('p', { class: 'inline-error', role: 'alert', hidden: true });
    const yes = h('button', { type: 'button', class: 'button small primary', dataset: { approve: a.id } }, 'Approve');
    const no = h('button', { type: 'button', class: 'button small', dataset: { deny: a.id } }, 'Deny');
    const answer = async (approved) => {
      yes.disabled = true;
      no.disabled = true;
      note.hidden = true;
      try {
        const r = await call('POST', `approvals/${seg(a.id)}`, { approved, reason: reason.value.trim() });
        reasons.delete(a.id);
        el.replaceWith(card(r.data));
        load();
      } catch (err) {
        note.textContent = `Could not answer: ${errorText(err)}`;
        note.hidden = false;
        yes.disabled = false;
        no.disabled = false;
      }
    };
    yes.addEventListener('click', () => answer(true));
    no.addEventListener('click', () => answer(false));
    const reads = Array.isArray(ev.reads) ? ev.reads : [];
    const el = h('li', null, h('article', { class: 'approval-card tool-call', dataset: { approvalId: a.id, status: a.status, state: a.status === 'pending' ? 'waiting' : a.status === 'denied' ? 'denied' : 'done' }, 'aria-label': `Approval ${a.id} for ${a.toolId}` },
      h('header', { class: 'tc-head' },
        h('span', { class: 'tc-name' }, a.toolId),
        a.effect ? effectBadge(a.effect) : null,
        h('span', { class: 'tc-badge' }, h('span', { class: ['pill', PILLS[a.status] || 'pill-none'], dataset: { verdict: a.status } }, LABELS[a.status] || a.status)),
        h('span', { class: 'muted approval-meta' }, `agent ${a.agentId} · via ${a.source} · asked ${stamp(a.createdAt)} · ${a.status === 'pending' || a.status === 'approved' ? left(a.expiresAt) : `answered ${stamp(a.answeredAt)}`}`)),
      h('div', { class: 'tc-evidence' },
        ev.action ? h('p', null, 'It would: ', h('code', null, ev.action)) : null,
        h('p', { class: 'tc-evidence-title' }, 'Arguments:'),
        h('pre', { class: 'json approval-args' }, JSON.stringify(ev.input ?? {}, null, 2)),
        h('p', { class: 'tc-evidence-title' }, 'Read before it:'),
        reads.length ? h('ul', { class: 'tc-reads' }, reads.map((r) => h('li', null, r)))
          : h('p', { class: 'muted' }, 'nothing: the call came on its own, with no read before it.'),
        h('p', { class: 'muted small approval-id' }, `${a.id} · arguments ${String(a.argsHash || '').slice(0, 12)}…`),
        a.reason ? h('p', { class: 'approval-reason' }, `Reason: ${a.reason}`) : null),
      a.status === 'pending'
        ? h('div', { class: 'tc-approval' }, h('p', { class: 'tc-approval-q' }, `Run ${a.toolName || a.toolId} once, with these arguments?`), reason, yes, no, note)
        : null));
    return el;
  }

  function render(items) {
    count.textContent = items.length === 1 ? '1 request' : `${items.length} requests`;
    if (!items.length) {
      list.replaceChildren(h('li', { class: 'empty muted' }, status === 'pending'
        ? 'Nothing waits for approval.' : `No ${status === 'all' ? '' : `${status} `}requests.`));
      return;
    }
    // A card being answered keeps its place and what was typed.
    const focused = document.activeElement && list.contains(document.activeElement);
    if (focused) return;
    list.replaceChildren(...items.map(card));
  }

  async function load() {
    if (busy) return;
    busy = true;
    refresh.disabled = true;
    if (!list.children.length) msg.replaceChildren(loading('approvals'));
    try {
      const r = await call('GET', `approvals?status=${encodeURIComponent(status)}`);
      msg.replaceChildren();
      render((r.data && r.data.approvals) || []);
    } catch (err) {
      msg.replaceChildren(banner('error', `Could not load the approvals: ${errorText(err)}`));
    } finally {
      busy = false;
      refresh.disabled = false;
    }
  }

  statusSel.addEventListener('change', () => navigate(`#/approvals/${statusSel.value}`));
  refresh.addEventListener('click', load);
  const tick = () => {
    clearInterval(timer);
    timer = auto.checked ? setInterval(load, AUTO_MS) : 0;
  };
  auto.addEventListener('change', tick);
  tick();

  return {
    el,
    update(arg) {
      status = STATUSES.includes(arg) ? arg : 'pending';
      statusSel.value = status;
      list.replaceChildren();
      return load();
    },
    destroy: () => clearInterval(timer),
  };
}
