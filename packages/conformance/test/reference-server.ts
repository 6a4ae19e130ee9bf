import { randomUUID } from 'node:crypto';
import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { AddressInfo } from 'node:net';

/**
 * A small Idempotency-Key server in memory, correct unless told to carry one
 * of the flaws below: the kit must pass it whole and fail each flaw on the
 * check that stands for it. POST /things {"tag": ...} records the tag (the
 * effect); GET /effects?tag= counts them.
 */
export type Flaw =
  | 'key-optional' // runs a request without a key
  | 'ignore-key' // runs every request: no idempotency at all
  | 'quoted-literal' // takes "k" with its quotes: another key than k
  | 'no-replayed-header' // replays without Idempotent-Replayed
  | 'no-fingerprint' // replays the first answer for another body
  | 'no-retry-after' // 409 without Retry-After
  | 'queue' // a duplicate waits for the original, then gets its replay
  | 'shared-scope' // one key space for every client
  | 'check-then-act'; // looks the key up, then claims it later: a race window

export interface ReferenceServer {
  url: string;
  effectsUrl: string;
  close(): Promise<void>;
}

interface KeyRecord {
  body: string;
  done: Promise<void>;
  response?: { status: number; body: string };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readBody(req: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of req) text += String(chunk);
  return text;
}

function reply(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(typeof body === 'string' ? body : JSON.stringify(body));
}

export async function startReferenceServer(options: { flaw?: Flaw; delayMs: number }): Promise<ReferenceServer> {
  const { flaw, delayMs } = options;
  const records = new Map<string, KeyRecord>();
  const effects: string[] = [];

  const work = async (body: string) => {
    await sleep(delayMs);
    const tag = String((JSON.parse(body) as { tag: unknown }).tag);
    effects.push(tag);
    return { status: 201, body: JSON.stringify({ id: randomUUID(), tag }) };
  };

  const post = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await readBody(req);
    const raw = req.headers['idempotency-key'] as string | undefined; // a custom header: never a list
    if (raw === undefined || flaw === 'ignore-key') {
      if (raw === undefined && flaw !== 'key-optional' && flaw !== 'ignore-key') return reply(res, 400, { title: 'Idempotency-Key is required' });
      const r = await work(body);
      return reply(res, r.status, r.body);
    }
    const key = flaw === 'quoted-literal' ? raw : raw.replace(/^"(.*)"$/, '$1');
    const id = `${flaw === 'shared-scope' ? '' : (req.headers.authorization ?? '')}\n${key}`;
    let record = records.get(id);
    // The flaw: what was looked up is acted on later, when another request may have claimed the key.
    if (flaw === 'check-then-act' && !record) await sleep(20);
    if (flaw === 'queue' && record && !record.response) {
      await record.done;
      record = records.get(id);
    }
    if (record) {
      if (record.body !== body && flaw !== 'no-fingerprint') return reply(res, 422, { title: 'Idempotency-Key reused with another body' });
      if (!record.response) return reply(res, 409, { title: 'in progress' }, flaw === 'no-retry-after' ? {} : { 'retry-after': '1' });
      return reply(res, record.response.status, record.response.body, flaw === 'no-replayed-header' ? {} : { 'idempotent-replayed': 'true' });
    }
    let finish = () => {};
    const fresh: KeyRecord = { body, done: new Promise<void>((r) => (finish = r)) };
    records.set(id, fresh);
    fresh.response = await work(body);
    finish();
    reply(res, fresh.response.status, fresh.response.body);
  };

  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (req.method === 'GET' && url.pathname === '/effects') return reply(res, 200, { count: effects.filter((t) => t === url.searchParams.get('tag')).length });
    if (req.method === 'POST' && url.pathname === '/things') return void post(req, res).catch(() => reply(res, 500, {}));
    reply(res, 404, {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    effectsUrl: `${url}/effects?tag={{unique}}`,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
