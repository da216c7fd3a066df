// Evals: runs of datasets (POST /v1/evals; the same engine as trawl eval)
// listed with their pass rates, a new run of the demo's dataset with its
// progress as it streams, and a run's cases — filtered by failed check —
// each shown beside the same case of the run's baseline: answers, tool
// calls and verdict badges side by side, differences marked.
// #/evals lists the runs; #/evals/<id> shows one.

import { call, openStream, readEvents, seg } from './api.js';
import { banner, clock, errorText, h, loading } from './dom.js';
import { completionBadge } from './verdict.js';

function pct(x) {
  return typeof x === 'number' ? `${Math.round(100 * x)}%` : '';
}

// statusPill is a run's or a check's state as a pill.
function statusPill(status) {
  const cls = { pass: 'pill-complete', done: 'pill-complete', fail: 'pill-failed', failed: 'pill-failed', running: 'pill-running', skip: 'pill-none' }[status] || 'pill-none';
  return h('span', { class: ['pill', cls], dataset: { status } }, status);
}

// side is one sample of a case: its answer, its calls with their verdict
// badges, its failed checks; against, the other side's sample, marks what
// differs, with word ("was", "now") before the other side's value.
function side(label, which, sample, against, word) {
  if (!sample) {
    return h('section', { class: 'eval-side', dataset: { side: which } }, h('h3', null, label), h('p', { class: 'muted' }, 'Not in this run.'));
  }
  const calls = sample.toolCalls || [];
  const other = (against && against.toolCalls) || [];
  const answerDiffers = against && against.answer !== sample.answer;
  return h('section', { class: 'eval-side', dataset: { side: which } },
    h('h3', null, label, ' ', statusPill(sample.passed ? 'pass' : 'fail')),
    h('ol', { class: 'eval-calls', 'aria-label': `${label}: tool calls` }, calls.length ? calls.map((c, i) => {
      const o = other[i];
      const differs = against && (!o || o.name !== c.name || o.verdict !== c.verdict);
      return h('li', { class: ['eval-call', differs && 'diff'], dataset: { tool: c.name, verdict: c.verdict || '' } },
        h('code', null, c.name), ' ', completionBadge(c.verdict || ''),
        differs ? h('span', { class: 'diff-note' }, o ? (o.name !== c.name ? ` (${word} ${o.name})` : ` (${word} ${o.verdict || 'none'})`) : ' (only here)') : null,
        h('pre', { class: 'eval-args' }, JSON.stringify(c.arguments || {})));
    }) : h('li', { class: 'muted' }, 'No tool call.')),
    h('div', { class: ['eval-answer', answerDiffers && 'diff'], dataset: { differs: answerDiffers ? 'true' : 'false' } },
      h('h4', null, 'Answer', answerDiffers ? ' (differs)' : ''), h('p', null, sample.answer || '(none)')),
    h('ul', { class: 'eval-checks', 'aria-label': `${label}: checks` }, (sample.checks || []).filter((c) => c.status !== 'pass').map((c) =>
      h('li', { dataset: { check: c.name, status: c.status } }, statusPill(c.status), ' ', h('code', null, c.name), c.detail ? `: ${c.detail}` : ''))));
}

export function evalsView({ navigate }) {
  const msg = h('div');
  const body = h('div');
  const el = h('section', { class: 'evals', 'aria-labelledby': 'evals-title' },
    h('div', { class: 'view-head' }, h('h1', { id: 'evals-title' }, 'Evals'),
      h('p', { class: 'muted' }, 'Datasets of conversations run as experiments (no cache reads, writes refused): each case\'s expectations and its honesty checks — unsupported_claim, verdict_changed. The same engine as trawl eval.')),
    msg, body);
  let abort = null;
  let filter = '';

  async function showList() {
    body.replaceChildren(loading('eval runs'));
    let list;
    try {
      list = (await call('GET', 'evals')).data.evals || [];
    } catch (err) {
      body.replaceChildren(banner('error', `Could not load the eval runs: ${errorText(err)}`));
      return;
    }
    const baseline = h('select', { id: 'evals-baseline', class: 'input' }, h('option', { value: '' }, 'none'),
      list.filter((r) => r.status === 'done').map((r) => h('option', { value: r.id }, `${r.id} (${r.dataset})`)));
    const start = h('button', { type: 'button', class: 'button primary', id: 'evals-start' }, 'Run the demo dataset');
    const progress = h('p', { class: 'muted', role: 'status', id: 'evals-progress' });
    start.addEventListener('click', () => run(baseline.value, start, progress));
    const rows = list.map((r) => h('tr', { dataset: { evalId: r.id, status: r.status } },
      h('td', null, h('a', { href: `#/evals/${encodeURIComponent(r.id)}` }, r.id)),
      h('td', null, r.dataset), h('td', null, statusPill(r.status)),
      h('td', null, r.totals ? `${r.totals.passed}/${r.totals.cases}` : `${r.done}/${r.total}`),
      h('td', { class: 'pass-rate' }, r.totals ? pct(r.totals.passRate) : ''),
      h('td', null, r.baseline || ''), h('td', null, clock(r.started))));
    body.replaceChildren(
      h('div', { class: 'toolbar' },
        h('div', { class: 'field' }, h('label', { class: 'field-label', for: 'evals-baseline' }, 'Compare with'), baseline),
        start),
      progress,
      list.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'table', id: 'evals-list' },
        h('thead', null, h('tr', null, ['run', 'dataset', 'status', 'passed', 'pass rate', 'baseline', 'started'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, rows))) : h('p', { class: 'muted', id: 'evals-empty' }, 'No eval run yet.'));
  }

  async function run(baseline, button, progress) {
    button.disabled = true;
    progress.textContent = 'Starting…';
    abort = new AbortController();
    let id = '';
    try {
      const res = await openStream('POST', 'evals', baseline ? { dataset: 'demo', baseline } : { dataset: 'demo' }, { signal: abort.signal });
      id = res.headers.get('X-Trawl-Run-Id') || '';
      await readEvents(res, ({ data }) => {
        if (data && data.type === 'data-eval-progress') {
          const d = data.data;
          progress.textContent = `${d.done}/${d.total} · ${d.case} ${d.passed ? 'passed' : 'failed'}`;
        } else if (data && data.type === 'error') {
          progress.textContent = `The run failed: ${data.errorText}`;
        }
      });
    } catch (err) {
      if (err.name !== 'AbortError') progress.textContent = `Could not run: ${errorText(err)}`;
      button.disabled = false;
      return;
    }
    if (id) navigate(`#/evals/${encodeURIComponent(id)}`);
  }

  async function showRun(id) {
    body.replaceChildren(loading('the run'));
    let r;
    let base = null;
    try {
      r = (await call('GET', `evals/${seg(id)}`)).data;
      if (r.baseline) base = (await call('GET', `evals/${seg(r.baseline)}`)).data.report;
    } catch (err) {
      body.replaceChildren(banner('error', `Could not load run ${id}: ${errorText(err)}`));
      return;
    }
    const rep = r.report;
    if (!rep) {
      body.replaceChildren(h('p', null, h('a', { href: '#/evals' }, '← Eval runs')), banner('info', `Run ${id} is ${r.status}${r.error ? `: ${r.error}` : ''} (${r.done}/${r.total}).`));
      return;
    }
    const failedNames = [...new Set(rep.cases.flatMap((c) => c.failed || []))].sort();
    const sel = h('select', { id: 'evals-filter', class: 'input' }, h('option', { value: '' }, 'every case'),
      failedNames.map((n) => h('option', { value: n, selected: n === filter }, `failed ${n}`)));
    const cases = h('div', { id: 'evals-cases' });
    const baseCases = new Map(((base && base.cases) || []).map((c) => [c.id, c]));
    const cmp = rep.comparison;
    const draw = () => {
      const shown = rep.cases.filter((c) => !filter || (c.failed || []).includes(filter));
      cases.replaceChildren(...shown.map((c) => {
        const b = baseCases.get(c.id);
        const mine = c.samples[0];
        const theirs = b ? b.samples[0] : null;
        return h('details', { class: 'eval-case', open: !c.passed, dataset: { case: c.id, passed: String(c.passed) } },
          h('summary', null, statusPill(c.passed ? 'pass' : 'fail'), ' ', h('strong', null, c.id), ` · pass rate ${pct(c.passRate)}`,
            c.failed && c.failed.length ? ` · failed: ${c.failed.join(', ')}` : ''),
          h('div', { class: base ? 'eval-sides' : 'eval-sides single' },
            side('This run', 'run', mine, base ? theirs : null, 'was'),
            base ? side(`Baseline ${r.baseline}`, 'baseline', theirs, mine, 'now') : null));
      }));
      if (!shown.length) cases.replaceChildren(h('p', { class: 'muted' }, 'No case failed that check.'));
    };
    sel.addEventListener('change', () => {
      filter = sel.value;
      draw();
    });
    draw();
    const t = rep.totals;
    body.replaceChildren(
      h('p', null, h('a', { href: '#/evals' }, '← Eval runs')),
      h('h2', { id: 'eval-run-title' }, `${id} · ${rep.dataset}`),
      h('p', { id: 'eval-totals' }, `${t.passed} of ${t.cases} cases passed · pass rate ${pct(t.passRate)} · ${t.upstreamRequests} upstream requests · ${t.tokens.total} tokens · model ${rep.model}`),
      cmp ? h('p', { id: 'eval-comparison', class: cmp.regressed ? 'inline-error' : 'muted' },
        `Against ${cmp.baseline}: ${cmp.newlyFailing.length} newly failing${cmp.newlyFailing.length ? ` (${cmp.newlyFailing.join(', ')})` : ''}, ${cmp.newlyPassing.length} newly passing; upstream requests ${cmp.requestsDelta >= 0 ? '+' : ''}${cmp.requestsDelta}${cmp.regressed ? ' · regressed' : ''}`) : null,
      h('div', { class: 'toolbar' }, h('div', { class: 'field' }, h('label', { class: 'field-label', for: 'evals-filter' }, 'Show'), sel)),
      cases);
  }

  return {
    el,
    update(arg) {
      msg.replaceChildren();
      if (arg) showRun(arg);
      else showList();
    },
    destroy() {
      if (abort) abort.abort();
    },
  };
}
