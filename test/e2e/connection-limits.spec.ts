import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { Socket, connect } from 'node:net';
import { Client } from 'pg';
import { WEBHOOK_PATH } from '../../src/payments/card-network-webhooks/card-network-webhooks.controller';
import { AppProcess, PROCESS_CLIENT, startAppProcess } from '../support/app-process';
import { TestDatabase, createTestDatabase } from '../support/database';
import { orderBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';

/**
 * The built service with 1,024 descriptors (`ulimit -n 1024`, so its total is
 * 1,024 less 376 kept for its own sockets: 648), flooded with connections
 * that never finish their headers, or never send a byte. Loopback is
 * 127.0.0.0/8 on Linux: each flood comes from addresses of its own, the
 * clients that must stay served from others.
 *
 * - One address may take every connection, and is warned of (loopback too):
 *   a new client, from another address or from that one, takes the place of
 *   its oldest unfinished connection; a keep-alive client keeps its own.
 * - 17 addresses fill the total (40 each) with webhook deliveries whose body
 *   never finishes (a public route: read before its signature is checked): a
 *   new client from an 18th is served all the same, the keep-alive client too, and the database pools
 *   and the check of /health still open new sockets (the process keeps
 *   descriptors for itself).
 * - Every flooding connection ends by itself: closed to make room, or
 *   answered 408 when its headers did not come within the request timeout
 *   (30 s; Node times a connection that sent nothing the same way).
 */
jest.setTimeout(180_000);

/** 1,024 open files less 256, the pools (20 + 10) and the charge slots (90): the defaults. */
const TOTAL = 1024 - 376;

const METRICS_TOKEN = 'metrics_limits_token_0123456789abcdef';
const KEEP_ALIVE_ADDRESS = '127.0.0.2';
const FRESH_ADDRESS = '127.0.0.3';
const OTHER_FRESH_ADDRESS = '127.0.0.4';

/** A flooding connection that never finishes its request. */
interface Unfinished {
  connected: boolean;
  closed: boolean;
  /** What the server sent before closing: '' when it closed without a word. */
  received: string;
  socket: Socket;
}

/**
 * What a flooding connection sends: `headers`, a request's headers begun and
 * never finished (every other connection: not a byte); `body`, a webhook
 * delivery's whole headers (the route is public, its signature checked once the
 * body is read) and 10 of the 1,000 bytes of its body.
 */
type Flood = 'headers' | 'body';
const STARTS: Record<Flood, (i: number) => string> = {
  headers: (i) => (i % 2 === 1 ? '' : 'GET /orders HTTP/1.1\r\nHost: flood\r\n'),
  body: () =>
    `POST ${WEBHOOK_PATH} HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\nStripe-Signature: t=1700000000,v1=${'0'.repeat(64)}\r\nContent-Length: 1000\r\n\r\n{"id":"evt_`,
};

function flood(port: number, addresses: string[], perAddress: number, kind: Flood = 'headers'): Unfinished[] {
  const all: Unfinished[] = [];
  for (const localAddress of addresses) {
    for (let i = 0; i < perAddress; i++) {
      const socket = connect({ port, host: '127.0.0.1', localAddress });
      const c: Unfinished = { connected: false, closed: false, received: '', socket };
      const start = STARTS[kind](i);
      socket.on('connect', () => {
        c.connected = true;
        if (start) socket.write(start);
      });
      socket.on('data', (chunk: Buffer) => (c.received += chunk.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => (c.closed = true));
      all.push(c);
    }
  }
  return all;
}

const held = (f: Unfinished[]) => f.filter((c) => c.connected && !c.closed).length;
const dropped = (f: Unfinished[]) => f.filter((c) => c.closed && c.received === '').length;
const timedOut = (f: Unfinished[]) => f.filter((c) => c.closed && c.received.startsWith('HTTP/1.1 408')).length;

/** A request on `agent` (a keep-alive connection from its address): its status, body and whether it reused the connection. */
function call(
  agent: Agent,
  port: number,
  { method = 'GET', path, headers = {}, body }: { method?: string; path: string; headers?: Record<string, string>; body?: unknown },
): Promise<{ status: number; text: string; reused: boolean }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method, path, agent, headers: payload ? { ...headers, 'Content-Type': 'application/json' } : headers, timeout: 10_000 },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, reused: req.reusedSocket }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** GET /health on a new connection from `localAddress`: its status, or 0 when the server closed it unanswered. */
function freshHealth(port: number, localAddress: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/health', localAddress, agent: false, timeout: 10_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

describe('connection limits, 1,024 descriptors (e2e, real sockets)', () => {
  let db: TestDatabase;
  let app: AppProcess;
  let keepAlive: Agent;
  const floods: Unfinished[] = [];

  /** Database checks of /health that ran and found the database up (a result served from the cache is not one). */
  const healthChecksUp = async () => Number(/^health_checks_total\{outcome="up"\} (\d+)/m.exec(await metricsText())?.[1] ?? 0);
  const metricsText = async () => (await call(keepAlive, app.port, { path: '/metrics', headers: { Authorization: `Bearer ${METRICS_TOKEN}` } })).text;
  const metric = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const order = () =>
    call(keepAlive, app.port, {
      method: 'POST',
      path: '/orders',
      headers: { Authorization: `Bearer ${PROCESS_CLIENT.key}`, 'Idempotency-Key': randomUUID() },
      body: orderBody(),
    });
  const evictions = async () => metric(await metricsText(), 'http_connections_evicted_total');
  /** A new client from `address` asks GET /health until it is answered 200: how many tries and how long it took. */
  const served = async (address: string) => {
    const started = performance.now();
    let tries = 0;
    await waitFor(`a new client from ${address} answered`, async () => (++tries, (await freshHealth(app.port, address)) === 200), { intervalMs: 250 });
    return { tries, ms: Math.round(performance.now() - started) };
  };
  /** Every flooding connection ends: closed without a word to make room, or answered 408 when no request arrived within 30 s (a silent one too). */
  const everyOneEnds = async (flooding: Unfinished[]) => {
    await waitFor('every flooding connection closed by the server', () => flooding.every((c) => c.closed), { timeoutMs: 90_000, intervalMs: 200 });
    expect(dropped(flooding) + timedOut(flooding)).toBe(flooding.length);
    expect(timedOut(flooding)).toBeGreaterThan(0);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await startAppProcess({
      env: { DATABASE_URL: db.url, METRICS_TOKEN, CARD_NETWORK_DELAY: '0ms', LOG_LEVEL: 'info' },
      descriptorLimit: 1024,
    });
    keepAlive = new Agent({ keepAlive: true, maxSockets: 1, localAddress: KEEP_ALIVE_ADDRESS });
    expect((await call(keepAlive, app.port, { path: '/health' })).status).toBe(200);
  });
  afterAll(async () => {
    for (const c of floods) c.socket.destroy();
    keepAlive?.destroy();
    await app?.stop();
    await db?.drop();
  });

  it('logs the total at boot and how it was derived', () => {
    const line = app.output().split('\n').find((l) => l.includes('"context":"Connections"') && l.includes('at most'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({ level: 30, total: TOTAL, descriptors: 1024, byDescriptors: TOTAL, msg: expect.stringMatching(/^at most 648 connections open: the smaller of 648 by descriptors/) });
  });

  it('one address opening 700 unfinished connections, past the total: a new client from it or another is served, the keep-alive client keeps its own; the address is warned of', async () => {
    const one = flood(app.port, ['127.0.0.1'], 700);
    floods.push(...one);
    await waitFor('every flooding connection accepted or closed', () => one.every((c) => c.connected || c.closed), { timeoutMs: 30_000 });
    await waitFor('the flood to hold every place but the keep-alive client\'s', () => held(one) === TOTAL - 1, { seen: () => held(one) });

    expect(await freshHealth(app.port, FRESH_ADDRESS)).toBe(200);
    expect(await freshHealth(app.port, '127.0.0.1')).toBe(200);
    expect(await call(keepAlive, app.port, { path: '/health' })).toMatchObject({ status: 200, reused: true });
    expect(await order()).toMatchObject({ status: 201, reused: true });
    const text = await metricsText();
    expect(metric(text, 'http_connections_limit')).toBe(TOTAL);
    expect(metric(text, 'http_connections_largest_untrusted_share')).toBeGreaterThan(0.9);
    const warning = app.output().split('\n').find((l) => l.includes('"context":"Connections"') && l.includes('"level":40'));
    expect(JSON.parse(warning ?? '{}')).toMatchObject({ address: '127.0.0.1', msg: expect.stringContaining('list your proxies in HTTP_TRUST_PROXY') });

    await everyOneEnds(one);
  });

  it('17 addresses filling the total with webhook bodies that never finish: a new client from an 18th address is served, the keep-alive client too, the database reached on new sockets', async () => {
    const addresses = Array.from({ length: 17 }, (_, i) => `127.0.1.${i + 1}`);
    const many = flood(app.port, addresses, 40, 'body');
    floods.push(...many);
    await waitFor('every flooding connection accepted or closed', () => many.every((c) => c.connected || c.closed), { timeoutMs: 30_000 });
    // The flood holds every place the keep-alive client does not: the server is full.
    await waitFor('the flood to hold every place but the keep-alive client\'s', () => held(many) === TOTAL - 1, { seen: () => held(many) });

    // The server is full: room for the new clients comes from closing flooding connections
    // (evictions), not from waiting for one to time out (none has yet).
    const evictedBefore = await evictions();
    const first = await served(FRESH_ADDRESS);
    const second = await served(OTHER_FRESH_ADDRESS);
    expect(await evictions()).toBeGreaterThan(evictedBefore);
    expect(timedOut(many)).toBe(0);
    console.log(`17 addresses, ${many.length} connections, total ${TOTAL}: new clients served after ${first.tries} try (${first.ms} ms) and ${second.tries} (${second.ms} ms)`);
    expect(await call(keepAlive, app.port, { path: '/health' })).toMatchObject({ status: 200, reused: true });

    // The app's database connections end (a database restart, a failover): its pools and its
    // health check must open new sockets while the flood holds every connection it may
    // (`holding`, checked after each: none of them has ended since).
    const holding = held(many);
    const pg = new Client({ connectionString: db.url });
    await pg.connect();
    try {
      await pg.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      const before = await healthChecksUp();
      await waitFor('a database check up on a new connection during the flood', async () => {
        if ((await call(keepAlive, app.port, { path: '/health' })).status !== 200) return undefined;
        const { rows } = await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'safe-retries-health'");
        return (rows[0].n > 0 && (await healthChecksUp()) > before) || undefined;
      }, { intervalMs: 250 });
      expect(held(many)).toBe(holding);
      const taken = await waitFor('an order taken over the keep-alive connection', async () => {
        const res = await order();
        return res.status === 201 ? res : undefined;
      }, { intervalMs: 250 });
      expect(taken.reused).toBe(true);
      expect(held(many)).toBe(holding);
    } finally {
      await pg.end();
    }
    const text = await metricsText();
    expect(metric(text, 'http_connections_open')).toBeLessThanOrEqual(TOTAL);
    expect(metric(text, 'http_connections_evicted_total')).toBeGreaterThan(0);

    await everyOneEnds(many);
    expect(await freshHealth(app.port, FRESH_ADDRESS)).toBe(200);
    // A delivery cut before its body arrived is no error of the app's.
    expect(app.output().split('\n').filter((l) => /"level":(50|60)/.test(l))).toEqual([]);
  });
});
