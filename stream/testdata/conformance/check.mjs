#!/usr/bin/env node
// Reads a UI message stream with the AI SDK's own code, once per installed
// major line (ai@5.0.60, the latest 6.x, the latest 7.x; see package.json),
// and prints a JSON summary. Exit status 0 when every check of every
// version passed, 1 when one failed, 2 on bad usage.
//
// Checks, per version:
//   schema  fetch the stream; parse it with parseJsonEventStream +
//           uiMessageChunkSchema; every chunk must validate. Also reports
//           the SSE framing: ids 1, 2, 3… (or after --after) and the final
//           "data: [DONE]".
//   read    readUIMessageStream over the chunks, to the end; the final
//           message must meet the expectations.
//   chat    an AbstractChat subclass with in-memory state (as useChat
//           keeps it) over DefaultChatTransport, POSTing one user message
//           to --url; the final status must be "ready" and the assistant
//           message must meet the expectations.
//
// Usage:
//   node check.mjs --url URL [--method POST|GET] [--body JSON]
//     [--header "Name: value"]... [--message TEXT] [--chat-body JSON]
//     [--checks schema,read,chat] [--versions ai5,ai6,ai7] [--after N]
//     [--expect-tool NAME]... [--expect-data NAME]... [--expect-text TEXT]
//     [--approve yes|no] [--expect-denied NAME]...
//
// --body is the raw request's body for the schema and read checks (default
// for POST: an AI SDK chat request carrying --message). --chat-body holds
// extra fields the chat transport merges into its request body.
// --expect-tool NAME: a part "tool-NAME", or "dynamic-tool" with toolName
// NAME, in state "output-available". --expect-data NAME: a part
// "data-NAME". --expect-text TEXT: the message's text contains TEXT.
// --after N: the stream is a resume after event N (ids start at N+1).
// --approve yes|no (ai >= 6): the chat answers every tool-approval-request
// with addToolApprovalResponse and sends the answer automatically
// (sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses);
// the final message must then meet the expectations. --expect-denied NAME:
// the tool part for NAME is in state "output-denied".

import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';

const usage = (msg) => {
  process.stderr.write(`check.mjs: ${msg}\n`);
  process.exit(2);
};

let args;
try {
  ({ values: args } = parseArgs({
    options: {
      url: { type: 'string' },
      method: { type: 'string', default: 'POST' },
      body: { type: 'string' },
      header: { type: 'string', multiple: true, default: [] },
      message: { type: 'string', default: 'List every open order.' },
      'chat-body': { type: 'string' },
      checks: { type: 'string', default: 'schema,read,chat' },
      versions: { type: 'string', default: 'ai5,ai6,ai7' },
      after: { type: 'string', default: '0' },
      'expect-tool': { type: 'string', multiple: true, default: [] },
      'expect-data': { type: 'string', multiple: true, default: [] },
      'expect-text': { type: 'string' },
      approve: { type: 'string' },
      'expect-denied': { type: 'string', multiple: true, default: [] },
    },
    strict: true,
  }));
} catch (err) {
  usage(err.message);
}
if (!args.url) usage('--url is required');
const method = args.method.toUpperCase();
if (method !== 'GET' && method !== 'POST') usage('--method must be GET or POST');
const checks = new Set(args.checks.split(',').filter(Boolean));
for (const c of checks) if (!['schema', 'read', 'chat'].includes(c)) usage(`unknown check ${c}`);
if (method === 'GET' && checks.has('chat')) usage('the chat check POSTs to --url; with --method GET, use --checks schema or schema,read');
if (args.approve !== undefined && args.approve !== 'yes' && args.approve !== 'no') usage('--approve must be yes or no');
const after = Number(args.after);
if (!Number.isInteger(after) || after < 0) usage('--after must be a non-negative integer');

const headers = {};
for (const h of args.header) {
  const i = h.indexOf(':');
  if (i <= 0) usage(`--header ${JSON.stringify(h)} is not "Name: value"`);
  headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
}
const parseJSONArg = (name, text) => {
  try {
    return JSON.parse(text);
  } catch (err) {
    usage(`--${name} is not JSON: ${err.message}`);
  }
};
const chatBody = args['chat-body'] ? parseJSONArg('chat-body', args['chat-body']) : undefined;
let rawBody;
if (args.body !== undefined) {
  parseJSONArg('body', args.body);
  rawBody = args.body;
} else if (method === 'POST') {
  rawBody = JSON.stringify({
    id: randomUUID(),
    messages: [{ id: randomUUID(), role: 'user', parts: [{ type: 'text', text: args.message }] }],
    trigger: 'submit-message',
    ...chatBody,
  });
}

// What a final assistant message must hold.
function expectationFailures(message) {
  const failures = [];
  if (!message) return ['no assistant message'];
  if (message.role !== 'assistant') failures.push(`last message role ${message.role}, want assistant`);
  const parts = message.parts ?? [];
  for (const name of args['expect-tool']) {
    const part = parts.find(
      (p) => p.type === `tool-${name}` || (p.type === 'dynamic-tool' && p.toolName === name),
    );
    if (!part) failures.push(`no tool part for ${name}`);
    else if (part.state !== 'output-available')
      failures.push(`tool part for ${name} in state ${part.state}, want output-available`);
  }
  for (const name of args['expect-denied']) {
    const part = parts.find(
      (p) => p.type === `tool-${name}` || (p.type === 'dynamic-tool' && p.toolName === name),
    );
    if (!part) failures.push(`no tool part for ${name}`);
    else if (part.state !== 'output-denied') failures.push(`tool part for ${name} in state ${part.state}, want output-denied`);
  }
  for (const name of args['expect-data']) {
    if (!parts.some((p) => p.type === `data-${name}`)) failures.push(`no data-${name} part`);
  }
  if (args['expect-text'] !== undefined) {
    const text = parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
    if (!text.includes(args['expect-text']))
      failures.push(`text ${JSON.stringify(text)} lacks ${JSON.stringify(args['expect-text'])}`);
  }
  return failures;
}

// A short view of a message's parts for the summary.
const partsSummary = (message) =>
  (message?.parts ?? []).map((p) => {
    const s = { type: p.type };
    if (p.toolName) s.toolName = p.toolName;
    if (p.state) s.state = p.state;
    if (p.type.startsWith('data-') && p.id) s.id = p.id;
    return s;
  });

// The SSE events of a body, as an SSE client reads them (comments skipped).
function sseEvents(text) {
  const events = [];
  let id, data;
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '') {
      if (data !== undefined) events.push({ id, data: data.join('\n') });
      id = undefined;
      data = undefined;
      continue;
    }
    if (line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'data') (data ??= []).push(value);
  }
  return events;
}

const streamOf = (text) =>
  new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode(text));
      c.close();
    },
  });

const errorText = (err) => (err instanceof Error ? err.message : String(err)).slice(0, 500);

async function checkVersion(pkg) {
  const ai = await import(pkg);
  const version = (await import(`${pkg}/package.json`, { with: { type: 'json' } })).default.version;
  const result = { package: pkg, version, failures: [] };
  const fail = (what, msg) => result.failures.push(`${what}: ${msg}`);

  if (checks.has('schema') || checks.has('read')) {
    const res = await fetch(args.url, {
      method,
      headers: { ...(rawBody ? { 'content-type': 'application/json' } : {}), ...headers },
      body: rawBody,
    });
    const text = await res.text();
    result.http = {
      status: res.status,
      contentType: res.headers.get('content-type'),
      uiMessageStream: res.headers.get('x-vercel-ai-ui-message-stream'),
    };
    if (res.status !== 200) fail('http', `status ${res.status}: ${text.slice(0, 200)}`);
    if (result.http.contentType !== 'text/event-stream') fail('http', `content-type ${result.http.contentType}`);
    if (result.http.uiMessageStream !== 'v1') fail('http', `x-vercel-ai-ui-message-stream ${result.http.uiMessageStream}`);

    const events = sseEvents(text);
    const chunkEvents = events.filter((e) => e.data !== '[DONE]');
    const ids = chunkEvents.map((e) => e.id);
    const sequential = ids.every((id, i) => id === String(after + i + 1));
    const done = events.length > 0 && events.at(-1).data === '[DONE]' && chunkEvents.length === events.length - 1;
    result.sse = { events: chunkEvents.length, firstId: ids[0] ?? null, lastId: ids.at(-1) ?? null, sequential, done };
    if (!sequential) fail('sse', `ids ${ids.slice(0, 10).join(',')}… are not ${after + 1}, ${after + 2}, …`);
    if (!done) fail('sse', 'the stream does not end with one "data: [DONE]"');

    const chunks = [];
    const invalid = [];
    const parsed = ai.parseJsonEventStream({ stream: streamOf(text), schema: ai.uiMessageChunkSchema });
    for await (const r of parsed) {
      if (r.success) chunks.push(r.value);
      else invalid.push({ chunk: r.rawValue ?? null, error: errorText(r.error) });
    }
    result.schema = { chunks: chunks.length, types: [...new Set(chunks.map((c) => c.type))], invalid: invalid.slice(0, 5) };
    if (invalid.length > 0) fail('schema', `${invalid.length} chunk(s) do not validate`);

    if (checks.has('read')) {
      let last;
      try {
        const chunkStream = new ReadableStream({
          start(c) {
            for (const chunk of chunks) c.enqueue(chunk);
            c.close();
          },
        });
        for await (const message of ai.readUIMessageStream({ stream: chunkStream, terminateOnError: true })) {
          last = message;
        }
        result.read = { parts: partsSummary(last) };
        for (const f of expectationFailures(last)) fail('read', f);
      } catch (err) {
        fail('read', errorText(err));
      }
    }
  }

  if (checks.has('chat')) {
    try {
      result.chat = await runChat(ai);
      if (result.chat.status !== 'ready') fail('chat', `status ${result.chat.status}${result.chat.error ? `: ${result.chat.error}` : ''}`);
      for (const f of result.chat.expectationFailures) fail('chat', f);
      delete result.chat.expectationFailures;
    } catch (err) {
      fail('chat', errorText(err));
    }
  }
  result.ok = result.failures.length === 0;
  return result;
}

// runChat sends one user message through a Chat whose state lives in
// memory, the way useChat's React state holds it.
async function runChat(ai) {
  class MemoryState {
    status = 'ready';
    error = undefined;
    messages = [];
    pushMessage = (m) => {
      this.messages = this.messages.concat(m);
    };
    popMessage = () => {
      this.messages = this.messages.slice(0, -1);
    };
    replaceMessage = (i, m) => {
      this.messages = [...this.messages.slice(0, i), this.snapshot(m), ...this.messages.slice(i + 1)];
    };
    snapshot = (thing) => structuredClone(thing);
  }
  class Chat extends ai.AbstractChat {
    constructor(init) {
      super({ ...init, state: new MemoryState() });
    }
  }
  let onErrorText;
  const approving = args.approve !== undefined;
  if (approving && typeof ai.lastAssistantMessageIsCompleteWithApprovalResponses !== 'function')
    throw new Error('this version has no tool approval (ai >= 6 needed)');
  const chat = new Chat({
    id: randomUUID(),
    transport: new ai.DefaultChatTransport({ api: args.url, headers, body: chatBody }),
    onError: (err) => {
      onErrorText = errorText(err);
    },
    ...(approving ? { sendAutomaticallyWhen: ai.lastAssistantMessageIsCompleteWithApprovalResponses } : {}),
  });
  await chat.sendMessage({ text: args.message });
  let approvals = 0;
  if (approving) {
    const asked = (chat.messages.at(-1)?.parts ?? []).filter((p) => p.state === 'approval-requested');
    if (asked.length === 0) throw new Error(`no part waits for approval: ${JSON.stringify(partsSummary(chat.messages.at(-1)))}`);
    for (const p of asked) {
      await chat.addToolApprovalResponse({ id: p.approval.id, approved: args.approve === 'yes', reason: 'checked by the harness' });
      approvals++;
    }
    for (let i = 0; i < 600 && chat.status !== 'ready' && chat.status !== 'error'; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const last = chat.messages.at(-1);
  return {
    approvals,
    status: chat.status,
    error: chat.error ? errorText(chat.error) : onErrorText,
    messages: chat.messages.length,
    parts: partsSummary(last),
    expectationFailures: expectationFailures(last),
  };
}

const versions = [];
for (const pkg of args.versions.split(',').filter(Boolean)) {
  try {
    versions.push(await checkVersion(pkg));
  } catch (err) {
    versions.push({ package: pkg, ok: false, failures: [errorText(err)] });
  }
}
const summary = { ok: versions.every((v) => v.ok), url: args.url, method, checks: [...checks], versions };
process.stdout.write(JSON.stringify(summary, null, 2) + '\n');
process.exit(summary.ok ? 0 : 1);
