// Talks to a trawl MCP server with an official TypeScript client and
// checks what README promises MCP clients, printing one line per check
// and exiting 1 when one fails.
//
//   node check.mjs --sdk client2|sdk1 --transport http|stdio
//                  [--url URL --token T] [--bin PATH --args "mcp ..."]
//                  [--records N] [--other-token T] [--admin-token T] [--page-size N]
//                  [--checks list,walk,...]
//
// client2 is @modelcontextprotocol/client 2.x pinned to 2026-07-28 (no
// initialize, per-request _meta, input_required for elicitation);
// sdk1 is @modelcontextprotocol/sdk 1.x on 2025-11-25 (sessions).

import * as v2 from '@modelcontextprotocol/client';
import { StdioClientTransport as V2Stdio } from '@modelcontextprotocol/client/stdio';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1HTTP } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport as V1Stdio } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ElicitRequestSchema as V1Elicit, ToolListChangedNotificationSchema as V1ListChanged } from '@modelcontextprotocol/sdk/types.js';

const argv = process.argv.slice(2);
const opt = {};
for (let i = 0; i < argv.length; i += 2) opt[argv[i].replace(/^--/, '')] = argv[i + 1];
const sdk = opt.sdk;
const want = { client2: '2026-07-28', sdk1: '2025-11-25' }[sdk];
if (!want) throw new Error(`--sdk must be client2 or sdk1, not ${sdk}`);
const checks = (opt.checks || 'connect,list,walk,query,progress,cancel,load').split(',');

let failed = 0;
function check(name, ok, detail) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${sdk}/${opt.transport} ${name}${ok ? '' : `: ${detail}`}`);
  if (!ok) failed++;
}

// Spy wraps a transport and remembers every message the server sent, so
// a check can see the negotiated version and that a cancelled request
// got no response.
class Spy {
  constructor(inner) {
    this.inner = inner;
    this.received = [];
    inner.onmessage = (m, extra) => {
      this.received.push(m);
      this.onmessage?.(m, extra);
    };
    inner.onclose = () => this.onclose?.();
    inner.onerror = (e) => this.onerror?.(e);
  }
  start() { return this.inner.start(); }
  send(m, o) { return this.inner.send(m, o); }
  close() { return this.inner.close(); }
  get sessionId() { return this.inner.sessionId; }
  get hasPerRequestStream() { return this.inner.hasPerRequestStream; }
  setProtocolVersion(v) { this.inner.setProtocolVersion?.(v); }
  get protocolVersion() { return this.inner.protocolVersion; }
  // negotiated is the revision initialize settled on (2025-11-25).
  negotiated() {
    for (const m of this.received) if (m.result?.protocolVersion) return m.result.protocolVersion;
    return undefined;
  }
}

// connect opens a client of the chosen SDK and transport. token
// overrides --token; elicit says whether to declare (and answer)
// elicitation; onListChanged hears tools/list_changed.
async function connect({ token = opt.token, elicit, onListChanged } = {}) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  let transport;
  if (opt.transport === 'http') {
    transport = sdk === 'client2'
      ? new v2.StreamableHTTPClientTransport(new URL(opt.url), { requestInit: { headers } })
      : new V1HTTP(new URL(opt.url), { requestInit: { headers } });
  } else {
    const params = { command: opt.bin, args: (opt.args || 'mcp').split(' '), stderr: 'ignore', cwd: opt.cwd };
    transport = sdk === 'client2' ? new V2Stdio(params) : new V1Stdio(params);
  }
  const spy = new Spy(transport);
  const info = { name: 'trawl-check', version: '1.0.0' };
  let client;
  if (sdk === 'client2') {
    const options = { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: elicit ? { elicitation: { form: {} } } : {} };
    if (onListChanged) options.listChanged = { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => onListChanged() } };
    client = new v2.Client(info, options);
    if (elicit) client.setRequestHandler('elicitation/create', async (req) => elicit(req.params));
  } else {
    client = new V1Client(info, { capabilities: elicit ? { elicitation: { form: {} } } : {} });
    if (onListChanged) client.setNotificationHandler(V1ListChanged, () => onListChanged());
    if (elicit) client.setRequestHandler(V1Elicit, async (req) => elicit(req.params));
  }
  await client.connect(spy);
  client.spy = spy;
  return client;
}

// listAll follows nextCursor (client2 aggregates the pages itself when
// asked without a cursor; sdk1 returns one page per call).
async function listAll(client, params = {}) {
  const out = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { ...params, cursor } : params);
    out.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  return out;
}

// call is callTool with request options (sdk1 takes a result schema
// before them).
const call = (client, params, options) => (sdk === 'sdk1' ? client.callTool(params, undefined, options) : client.callTool(params, options));

const text = (res) => (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');

async function main() {
  const client = await connect();
  try {
    if (checks.includes('connect')) {
      const negotiated = sdk === 'client2' ? client.getNegotiatedProtocolVersion() : client.spy.negotiated();
      check('connect negotiates its revision', negotiated === want, `negotiated ${negotiated}`);
      check('instructions carry the looping guidance', (client.getInstructions() || '').includes('_all_pages'), client.getInstructions());
    }
    if (checks.includes('list')) {
      const tools = await listAll(client);
      const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
      const orders = byName.list_orders;
      const props = orders?.inputSchema?.properties || {};
      check('tools/list has the reserved arguments', ['_all_pages', '_fields', '_for_each', '_refresh', '_thread', '_max_chars'].every((a) => props[a]),
        JSON.stringify(Object.keys(props)));
      const a = orders?.annotations || {};
      check('effects are annotations', a.readOnlyHint === true && a.idempotentHint === true && a.destructiveHint === false && a.openWorldHint === true,
        JSON.stringify(a));
      const del = Object.values(byName).find((t) => t.annotations?.destructiveHint === true);
      check('a destructive tool says so', !del || del.annotations.readOnlyHint === false, JSON.stringify(del?.annotations));
      check('looping tools declare the envelope', !!orders?.outputSchema && orders._meta?.['anthropic/maxResultSizeChars'] > 0, JSON.stringify(orders?._meta));
      check('search_tools and the retrieval tools are listed', ['search_tools', 'load_tool', 'queryToolResult', 'fetchToolResult'].every((n) => byName[n]),
        Object.keys(byName).join(','));
      if (opt['page-size']) {
        const size = Number(opt['page-size']);
        if (sdk === 'sdk1') {
          const first = await client.listTools();
          check('tools/list pages with nextCursor', first.tools.length === size && !!first.nextCursor, `${first.tools.length} tools, cursor ${first.nextCursor}`);
        }
        check('the client follows every page', tools.length > size && new Set(tools.map((t) => t.name)).size === tools.length, `${tools.length} tools`);
      }
    }
    let walk;
    if (checks.includes('walk') || checks.includes('query')) {
      const res = await client.callTool({ name: 'list_orders', arguments: { status: 'open', _all_pages: true, _fields: ['id', 'total'] } });
      walk = res.structuredContent;
      const b = walk?._boundary || {};
      check('a walk with _all_pages and _fields is complete', !res.isError && walk?._pagingComplete === true && b.completion === 'complete', JSON.stringify(b));
      const records = Number(opt.records);
      const rows = walk?.data || [];
      check('its rows are right', rows.length === records && b.records === records &&
        rows.every((r) => Object.keys(r).sort().join(',') === 'id,total' && /^ord_/.test(r.id)), `${rows.length} rows, want ${records}`);
      check('the text content is the envelope', JSON.parse(text(res))._note === walk?._note, text(res).slice(0, 200));
      check('the text opens with the verdict', text(res).startsWith('{"_pagingComplete":true,'), text(res).slice(0, 200));
      // The smallest _max_chars on a partial walk: the client checks the
      // result against the outputSchema (it throws when it does not match).
      const small = await client.callTool({ name: 'list_orders', arguments: { _all_pages: true, _max_chars: 1000 } });
      const sc = small.structuredContent || {};
      check('a small _max_chars keeps the verdict whole and cuts between rows', !small.isError && sc._pagingComplete === false &&
        sc._boundary?.completion === 'partial' && typeof sc._stoppedBy === 'string' && sc._likelyMoreRows === true &&
        (sc.data || []).length === sc._shownItems && /^Partial/.test(sc._note || ''), JSON.stringify(sc).slice(0, 300));
    }
    if (checks.includes('query')) {
      const res = await client.callTool({ name: 'queryToolResult', arguments: { resultId: walk._resultId, filter: [{ field: 'total', op: 'gt', value: 100 }], limit: 5 } });
      const out = JSON.parse(text(res));
      check('queryToolResult reads the earlier _resultId', !res.isError && (out.items || out.rows || out.data || []).length > 0, text(res).slice(0, 300));
    }
    if (checks.includes('progress')) {
      const seen = [];
      const res = await call(client, { name: 'list_orders', arguments: { status: 'paid', _all_pages: true, _fields: ['id'], _refresh: true } },
        { onprogress: (p) => seen.push(p) });
      check('progress arrives while the walk runs', !res.isError && seen.length > 0 &&
        seen.every((p) => p.total > 0 && /^page \d+ · [\d,]+ of [\d,]+ items · \d+ requests?$/.test(p.message)), JSON.stringify(seen));
    }
    if (checks.includes('cancel')) {
      const thread = `cancel-${sdk}-${opt.transport}-${Date.now()}`;
      const ac = new AbortController();
      let first;
      const started = new Promise((r) => { first = r; });
      const pending = call(client, { name: 'list_orders', arguments: { _all_pages: true, _fields: ['id'], _refresh: true, _thread: thread } },
        { signal: ac.signal, onprogress: () => first() });
      await started;
      const before = client.spy.received.length;
      ac.abort();
      const err = await pending.then(() => null, (e) => e);
      check('a cancelled call is rejected', err !== null, 'it answered');
      // The next call of the conversation says what the cancelled one fetched.
      let res;
      for (let i = 0; i < 50; i++) {
        res = await client.callTool({ name: 'get_stats', arguments: { _thread: thread } });
        if (res._meta?.['trawl/interrupted']) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const earlier = res._meta?.['trawl/interrupted'] || [];
      check('the next call says what the cancelled walk fetched', earlier.length === 1 && /cancelled/.test(earlier[0].note) && earlier[0].resultId,
        JSON.stringify(res._meta));
      const stats = text(res);
      check('and tells the model', stats.includes('was cancelled before it finished'), stats.slice(-300));
      const q = await client.callTool({ name: 'queryToolResult', arguments: { resultId: earlier[0]?.resultId, limit: 3, _thread: thread } });
      check('its partial rows are kept', !q.isError, text(q).slice(0, 300));
      const late = client.spy.received.slice(before).filter((m) => m.id !== undefined && (m.result?._boundary || m.result?.structuredContent?._boundary?.stopReason === 'cancelled'));
      check('the cancelled request got no response', late.length === 0, JSON.stringify(late).slice(0, 300));
    }
    if (checks.includes('load')) {
      const thread = `load-${sdk}-${opt.transport}-${Date.now()}`;
      let heard;
      const changed = new Promise((r) => { heard = r; });
      const c = await connect({ onListChanged: () => heard() });
      try {
        const found = await c.callTool({ name: 'search_tools', arguments: { query: 'list the mail labels', _thread: thread } });
        check('search_tools finds a pooled tool', !found.isError && text(found).includes('MAIL_LIST_LABELS'), text(found).slice(0, 300));
        const loaded = await c.callTool({ name: 'load_tool', arguments: { toolName: 'MAIL_LIST_LABELS', _thread: thread } });
        check('load_tool loads it', !loaded.isError, text(loaded));
        const got = await Promise.race([changed.then(() => true), new Promise((r) => setTimeout(() => r(false), 10000))]);
        check('list_changed follows', got, 'no notifications/tools/list_changed within 10 s');
        const tools = await listAll(c, { _meta: { 'trawl/thread': thread } });
        check('the loaded tool is listed in its conversation', tools.some((t) => t.name === 'MAIL_LIST_LABELS'), tools.map((t) => t.name).join(','));
        const labels = await c.callTool({ name: 'MAIL_LIST_LABELS', arguments: { _thread: thread } });
        check('and called', !labels.isError, text(labels).slice(0, 300));
      } finally {
        await c.close();
      }
    }
    if (checks.includes('approval')) {
      // The demo agent runs with demo: {approval: {write: required}}.
      const send = (c, words, thread) => c.callTool({ name: 'CHAT_SEND_MESSAGE', arguments: { conversation_id: 'conv_01', text: words, _thread: thread } });
      for (const approve of [true, false]) {
        const asked = [];
        const c = await connect({ elicit: async (params) => {
          asked.push(params);
          return approve ? { action: 'accept', content: { approve: true } } : { action: 'decline' };
        } });
        try {
          const res = await send(c, `elicited ${approve}`, `approve-${sdk}-${opt.transport}-${approve}-${Date.now()}`);
          const shown = asked[0]?.message || '';
          check(`a write needing approval is elicited (${approve ? 'accept' : 'decline'})`, asked.length === 1 && shown.includes('CHAT_SEND_MESSAGE') &&
            shown.includes('POST /conversations/{conversation_id}/messages') && shown.includes(`elicited ${approve}`), JSON.stringify(asked));
          check(approve ? 'accepted: it runs' : 'declined: it is denied and not run',
            approve ? !res.isError : res.isError && text(res).startsWith('approval_denied'), text(res).slice(0, 300));
        } finally {
          await c.close();
        }
      }
      const thread = `inbox-${sdk}-${opt.transport}-${Date.now()}`;
      const first = await send(client, 'through the inbox', thread);
      const id = first._meta?.['trawl/approval']?.id;
      if (opt.transport === 'stdio') {
        // trawl mcp keeps its store to itself: no one can reach its inbox.
        check('without elicitation: approval_required saying no inbox is reachable', first.isError && text(first).startsWith('approval_required') &&
          text(first).includes('no approvals inbox anyone can reach') && text(first).includes('elicitation'), text(first));
      } else {
        check('without elicitation: approval_required naming the inbox request', first.isError && text(first).startsWith('approval_required') &&
          /^apr_/.test(id) && text(first).includes(id), text(first));
      }
      if (opt['admin-token']) {
        const again = await send(client, 'through the inbox', thread);
        check('not run before a person answers', again.isError && text(again).includes('has not been answered'), text(again));
        const base = new URL(opt.url);
        const answer = await fetch(new URL(`/v1/approvals/${id}`, base), { method: 'POST', headers: { Authorization: `Bearer ${opt['admin-token']}`, 'Content-Type': 'application/json' },
          body: JSON.stringify({ approved: true, reason: 'checked' }) });
        check('a person approves it in the inbox', answer.status === 200, String(answer.status));
        const ran = await send(client, 'through the inbox', thread);
        check('the same call then runs', !ran.isError && ran._meta?.['trawl/approval']?.id === id, text(ran).slice(0, 300));
        const twice = await send(client, 'through the inbox', thread);
        check('once', twice.isError && text(twice).startsWith('approval_required'), text(twice).slice(0, 300));
      }
    }
    if (checks.includes('upstream')) {
      // The agent binds the pinned server-everything: its resources,
      // prompts and pictures reach the client through trawl.
      const { resources } = await client.listResources();
      const doc = resources.find((r) => r.uri.startsWith('demo://resource/static/document/'));
      check('resources/list passes the upstream resources on', !!doc, JSON.stringify(resources).slice(0, 300));
      const read = doc ? await client.readResource({ uri: doc.uri }) : { contents: [] };
      check('resources/read reads one', read.contents.length === 1 && read.contents[0].uri === doc.uri && read.contents[0].text?.length > 0,
        JSON.stringify(read).slice(0, 300));
      const { resourceTemplates } = await client.listResourceTemplates();
      check('resources/templates/list passes the templates on', resourceTemplates.some((t) => t.uriTemplate === 'demo://resource/dynamic/text/{resourceId}'),
        JSON.stringify(resourceTemplates).slice(0, 300));
      const dyn = await client.readResource({ uri: 'demo://resource/dynamic/text/3' });
      check('a templated resource reads', /^Resource 3: This is a plaintext resource/.test(dyn.contents[0]?.text || ''), JSON.stringify(dyn).slice(0, 300));
      const { prompts } = await client.listPrompts();
      check('prompts/list passes the prompts on', ['simple-prompt', 'args-prompt'].every((n) => prompts.some((p) => p.name === n)),
        prompts.map((p) => p.name).join(','));
      const got = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Lyon' } });
      check('prompts/get renders one with its arguments', got.messages[0]?.content?.text === "What's weather in Lyon?", JSON.stringify(got).slice(0, 300));
      const img = await client.callTool({ name: 'get-tiny-image', arguments: {} });
      const pic = (img.content || []).find((c) => c.type === 'image');
      check('an upstream picture arrives as an image block', !img.isError && pic?.mimeType === 'image/png' &&
        Buffer.from(pic.data, 'base64').subarray(1, 4).toString() === 'PNG', JSON.stringify(img).slice(0, 300));
    }
    if (checks.includes('unauthorized')) {
      const err = await connect({ token: '' }).then((c) => { c.close(); return null; }, (e) => e);
      check('no token: 401', err !== null && /401|nauthorized/.test(String(err?.message ?? err) + String(err?.code ?? '')), String(err));
    }
    if (checks.includes('isolation')) {
      const res = await client.callTool({ name: 'list_orders', arguments: { status: 'open', _all_pages: true, _fields: ['id'] } });
      const id = res.structuredContent?._resultId;
      const other = await connect({ token: opt['other-token'] });
      try {
        const q = await other.callTool({ name: 'queryToolResult', arguments: { resultId: id, limit: 1 } });
        check('another session token cannot read the result', q.isError && /not found/.test(text(q)), text(q));
        const mine = await client.callTool({ name: 'queryToolResult', arguments: { resultId: id, limit: 1 } });
        check('its own can', !mine.isError, text(mine));
      } finally {
        await other.close();
      }
    }
  } finally {
    await client.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL ${sdk}/${opt.transport}: ${e?.stack || e}`);
  process.exit(1);
});
