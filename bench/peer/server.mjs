// The AI SDK's own Node server, for trawl's stream benchmark
// (stream/bench_test.go, BenchmarkAppendToReadPeer): runs stream
// data-tool-loop-progress chunks on the schedule the benchmark sends, and
// clients follow them over SSE, the way an AI SDK app serves useChat.
//
//   node server.mjs ui          createUIMessageStream per client, fed from
//                               the run in this process
//   node server.mjs resumable   one createUIMessageStream per run behind
//                               resumable-stream, on an in-memory
//                               publisher; every client resumes it
//
// It prints "listening PORT" once ready. Routes:
//   POST /open   {runs}                                   the runs exist
//   POST /start  {startAt, every, perInterval, emitFor}   emit on schedule (ms)
//   GET  /runs/:id                                        follow a run (SSE)
//   GET  /mem                                             {heap, rss} after a GC
import http from 'node:http';
import { EventEmitter } from 'node:events';
import { createUIMessageStream, JsonToSseTransformStream, UI_MESSAGE_STREAM_HEADERS } from 'ai';
import { createResumableStreamContext } from 'resumable-stream/generic';

const mode = process.argv[2] ?? 'ui';
if (mode !== 'ui' && mode !== 'resumable') {
  console.error(`unknown mode ${mode}: ui or resumable`);
  process.exit(2);
}

// An in-memory publisher and subscriber with the Redis-like interface
// resumable-stream takes.
function memoryPubSub() {
  const kv = new Map();
  const channels = new Map();
  const publisher = {
    connect: async () => {},
    publish: async (channel, message) => {
      const subs = channels.get(channel);
      if (!subs) return 0;
      for (const cb of subs) cb(message);
      return subs.size;
    },
    set: async (key, value) => {
      kv.set(key, value);
      return 'OK';
    },
    get: async (key) => (kv.has(key) ? kv.get(key) : null),
    incr: async (key) => {
      const n = Number(kv.get(key) ?? 0) + 1;
      kv.set(key, String(n));
      return n;
    },
  };
  const subscriber = {
    connect: async () => {},
    subscribe: async (channel, cb) => {
      let subs = channels.get(channel);
      if (!subs) channels.set(channel, (subs = new Set()));
      subs.add(cb);
    },
    unsubscribe: async (channel) => {
      channels.delete(channel);
    },
  };
  return { publisher, subscriber };
}

const runs = new Map(); // id → {emitter, done}
const pubsub = memoryPubSub();
const resumable = createResumableStreamContext({ waitUntil: null, ...pubsub });

// uiStream is one UI message stream fed by a run's chunks until it ends.
function uiStream(run) {
  return createUIMessageStream({
    execute: ({ writer }) =>
      new Promise((resolve) => {
        if (run.done) return resolve();
        const onChunk = (c) => writer.write(c);
        run.emitter.on('chunk', onChunk);
        run.emitter.once('end', () => {
          run.emitter.off('chunk', onChunk);
          resolve();
        });
      }),
  }).pipeThrough(new JsonToSseTransformStream());
}

function open(n) {
  for (let r = 0; r < n; r++) {
    const id = `run${r}`;
    const run = { emitter: new EventEmitter(), done: false };
    run.emitter.setMaxListeners(0);
    runs.set(id, run);
    if (mode === 'resumable') {
      // The run's own stream: made once, drained here; clients resume it.
      resumable.createNewResumableStream(id, () => uiStream(run)).then(async (s) => {
        if (!s) return;
        const reader = s.getReader();
        while (!(await reader.read()).done) {}
      });
    }
  }
}

function start({ startAt, every, perInterval, emitFor }) {
  const n = runs.size;
  let r = 0;
  for (const run of runs.values()) {
    const spread = (every * r) / n;
    r++;
    let k = 0;
    let seq = 0;
    const next = () => {
      const due = startAt + spread + k * every;
      if (spread + k * every >= emitFor) {
        run.done = true;
        run.emitter.emit('end');
        return;
      }
      setTimeout(() => {
        for (let call = 0; call < perInterval; call++) {
          seq++;
          run.emitter.emit('chunk', {
            type: 'data-tool-loop-progress',
            id: `call_${call}`,
            data: {
              seq, toolCallId: `call_${call}`, toolName: 'list_orders', page: k + 1, pagesMax: 20,
              items: 50 * (k + 1), requests: k + 1, requestsMax: 60, elapsedMs: Date.now() - startAt,
            },
          });
        }
        k++;
        next();
      }, Math.max(0, due - Date.now()));
    };
    next();
  }
}

async function follow(req, res, id) {
  const run = runs.get(id);
  if (!run) {
    res.writeHead(404).end();
    return;
  }
  let stream = mode === 'resumable' ? await resumable.resumeExistingStream(id) : uiStream(run);
  if (!stream) {
    res.writeHead(410).end();
    return;
  }
  res.writeHead(200, UI_MESSAGE_STREAM_HEADERS);
  res.flushHeaders();
  const reader = stream.getReader();
  req.on('close', () => reader.cancel().catch(() => {}));
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    res.write(value);
  }
  res.end();
}

function body(req) {
  return new Promise((resolve) => {
    let b = '';
    req.on('data', (d) => (b += d));
    req.on('end', () => resolve(b ? JSON.parse(b) : {}));
  });
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.method === 'POST' && req.url === '/open') {
      open((await body(req)).runs);
      res.end('{}');
    } else if (req.method === 'POST' && req.url === '/start') {
      start(await body(req));
      res.end('{}');
    } else if (req.method === 'GET' && req.url === '/mem') {
      globalThis.gc?.();
      globalThis.gc?.();
      const m = process.memoryUsage();
      res.end(JSON.stringify({ heap: m.heapUsed + m.external, rss: m.rss }));
    } else if (req.method === 'GET' && req.url.startsWith('/runs/')) {
      await follow(req, res, req.url.slice('/runs/'.length));
    } else {
      res.writeHead(404).end();
    }
  } catch (e) {
    console.error(e);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});
server.keepAliveTimeout = 0;
server.requestTimeout = 0;
server.headersTimeout = 0;
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
