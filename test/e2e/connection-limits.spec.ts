import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { Socket, connect } from 'node:net';
import { Client } from 'pg';
import { AppProcess, PROCESS_CLIENT, startAppProcess } from '../support/app-process';
import { TestDatabase, createTestDatabase } from '../support/database';
import { orderBody } from '../support/fixtures';
import { waitFor } from '../support/http-client';

/**
 * The built service with 1,024 descriptors (`ulimit -n 1024`), flooded with
 * connections that never finish their headers. Loopback is 127.0.0.0/8 on
 * Linux: each flood comes from addresses of its own, the clients that must
 * stay served from others.
 *
 * - One address cannot fill the server: past its share, its new connections
 *   are closed at once, and a new client on another address is served.
 * - Many addresses can fill it, up to the total: new connections are then
 *   refused, but a keep-alive client already connected is served, and the
 *   database pools and the check of /health still open new sockets (the
 *   process keeps descriptors for itself).
 * - Every flooding connection ends by itself: closed at once over a cap, or
 *   answered 408 when its headers did not come within the request timeout (30 s).
 */
jest.setTimeout(120_000);

const METRICS_TOKEN = 'metrics_limits_token_0123456789abcdef';
const KEEP_ALIVE_ADDRESS = '127.0.0.2';
const FRESH_ADDRESS = '127.0.0.3';

/** A flooding connection: headers begun, never finished. */
interface Unfinished {
  connected: boolean;
  closed: boolean;
  /** What the server sent before closing: '' when it closed without a word. */
  received: string;
  socket: Socket;
}

function flood(port: number, addresses: string[], perAddress: number): Unfinished[] {
  const all: Unfinished[] = [];
  for (const localAddress of addresses) {
    for (let i = 0; i < perAddress; i++) {
      const socket = connect({ port, host: '127.0.0.1', localAddress });
      const c: Unfinished = { connected: false, closed: false, received: '', socket };
      socket.on('connect', () => {
        c.connected = true;
        socket.write('GET /orders HTTP/1.1\r\nHost: flood\r\n');
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
  const healthChecksUp = async () => {
    const metrics = await call(keepAlive, app.port, { path: '/metrics', headers: { Authorization: `Bearer ${METRICS_TOKEN}` } });
    return Number(/^health_checks_total\{outcome="up"\} (\d+)/m.exec(metrics.text)?.[1] ?? 0);
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    app = await startAppProcess({
      env: { DATABASE_URL: db.url, METRICS_TOKEN, CARD_NETWORK_DELAY: '0ms' },
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

  it('one address opening 300 unfinished connections: a new client and a keep-alive client are served; each flooding connection ends', async () => {
    const one = flood(app.port, ['127.0.0.1'], 300);
    floods.push(...one);
    await waitFor('every flooding connection accepted or closed', () => one.every((c) => c.connected || c.closed), { timeoutMs: 30_000 });
    // The kernel completes connections before the server takes them: one more from the address,
    // taken after them all, is closed unanswered once the server has dealt with every one.
    expect(await freshHealth(app.port, '127.0.0.1')).toBe(0);

    expect(await freshHealth(app.port, FRESH_ADDRESS)).toBe(200);
    expect(await call(keepAlive, app.port, { path: '/health' })).toMatchObject({ status: 200, reused: true });
    const order = await call(keepAlive, app.port, {
      method: 'POST',
      path: '/orders',
      headers: { Authorization: `Bearer ${PROCESS_CLIENT.key}`, 'Idempotency-Key': randomUUID() },
      body: orderBody(),
    });
    expect(order).toMatchObject({ status: 201, reused: true });
    // Held connections: open, under the cap; none still open once its header deadline passed.
    const kept = held(one);
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(one.length);

    await waitFor('every flooding connection closed by the server', () => one.every((c) => c.closed), { timeoutMs: 60_000, intervalMs: 200 });
    expect(dropped(one) + timedOut(one)).toBe(one.length);
    expect(timedOut(one)).toBe(kept);
  });

  it('40 addresses opening 1,800 unfinished connections: new ones are refused at the total, the keep-alive client is served, the database reached on new sockets', async () => {
    const addresses = Array.from({ length: 40 }, (_, i) => `127.0.1.${i + 1}`);
    const many = flood(app.port, addresses, 45);
    floods.push(...many);
    await waitFor('every flooding connection accepted or closed', () => many.every((c) => c.connected || c.closed), { timeoutMs: 30_000 });
    // A new client on an address of its own is refused: the server holds all it may.
    expect(await freshHealth(app.port, FRESH_ADDRESS)).toBe(0);
    // Below the descriptors of the process: the rest are kept for its own sockets.
    await waitFor('the connections held to be fewer than the descriptors less a reserve', () => held(many) < 1024 - 200, { timeoutMs: 10_000 });

    // The app's database connections end (a database restart, a failover): its pools and its
    // health check must open new sockets while the flood holds every connection it may.
    const pg = new Client({ connectionString: db.url });
    await pg.connect();
    try {
      await pg.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      const before = await healthChecksUp();
      await waitFor('a database check up on a new connection during the flood', async () => {
        if ((await call(keepAlive, app.port, { path: '/health' })).status !== 200) return undefined;
        const { rows } = await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'safe-retries-health'");
        return (rows[0].n > 0 && (await healthChecksUp()) > before) || undefined;
      }, { timeoutMs: 10_000, intervalMs: 250 });
      const order = await waitFor('an order taken over the keep-alive connection', async () => {
        const res = await call(keepAlive, app.port, {
          method: 'POST',
          path: '/orders',
          headers: { Authorization: `Bearer ${PROCESS_CLIENT.key}`, 'Idempotency-Key': randomUUID() },
          body: orderBody(),
        });
        return res.status === 201 ? res : undefined;
      }, { timeoutMs: 10_000, intervalMs: 250 });
      expect(order.reused).toBe(true);
    } finally {
      await pg.end();
    }
    expect(held(many)).toBeGreaterThan(0);

    await waitFor('every flooding connection closed by the server', () => many.every((c) => c.closed), { timeoutMs: 60_000, intervalMs: 200 });
    expect(dropped(many) + timedOut(many)).toBe(many.length);
    expect(timedOut(many)).toBeGreaterThan(0);
    expect(await freshHealth(app.port, FRESH_ADDRESS)).toBe(200);
  });
});
