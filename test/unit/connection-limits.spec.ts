import { mkdtempSync, writeFileSync } from 'node:fs';
import { Server, ServerResponse, createServer, request } from 'node:http';
import { Socket, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConnectionTable, limitConnections } from '../../src/http/connection-fairness';
import { connectionLimits, describeLimits, descriptorLimit, memoryLimit } from '../../src/http/connection-limits';
import { loadConfig } from '../../src/config/config';
import { productionWarnings } from '../../src/config/production';
import { waitFor } from '../support/http-client';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            4096                 524288               files
Max locked memory         8388608              8388608              bytes
`;
const GiB = 2 ** 30;

describe('descriptorLimit', () => {
  it('reads the soft limit of open files', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'limits-')), 'limits');
    writeFileSync(file, LIMITS);
    expect(descriptorLimit(file)).toBe(4096);
  });

  it('assumes 1024 where the limit cannot be read', () => {
    expect(descriptorLimit('/nonexistent/limits')).toBe(1024);
  });

  it("reads this process's own limit on Linux", () => {
    if (process.platform !== 'linux') return;
    expect(descriptorLimit()).toBeGreaterThanOrEqual(64);
  });
});

describe('memoryLimit', () => {
  it("is the container's limit when it has one, else the machine's", () => {
    expect(memoryLimit(2 * GiB, 32 * GiB)).toBe(2 * GiB);
    expect(memoryLimit(0, 32 * GiB)).toBe(32 * GiB);
    // An unconstrained process reads a number past the machine's memory (2^64 - 1 on cgroup v1).
    expect(memoryLimit(Number.MAX_SAFE_INTEGER, 32 * GiB)).toBe(32 * GiB);
  });
});

describe('connectionLimits', () => {
  // 256 + 20 (pool) + 10 (claims) + 90 (charge slots) descriptors kept; a connection may hold 2 × 100 KiB + 64 KiB.
  const config = loadConfig({ DATABASE_POOL_SIZE: '20', PAYMENTS_CONCURRENCY: '90' });

  it('keeps descriptors for the process (256, its pools, its charge slots) at 1,024 open files', () => {
    expect(connectionLimits(config, 1024, 32 * GiB)).toMatchObject({ total: 1024 - 376, byDescriptors: 648, perConnectionBytes: 270_336 });
  });

  it("at a container's million descriptors, memory sets the total: half the container's memory at 264 KiB a connection", () => {
    const limits = connectionLimits(config, 1_048_576, 2 * GiB);
    expect(limits).toMatchObject({ total: 3971, byDescriptors: 1_048_576 - 376, byMemory: 3971 });
    expect(describeLimits(limits)).toBe(
      "at most 3,971 connections open: the smaller of 1,048,200 by descriptors (1,048,576 open files less 376 kept for the process's own sockets) and 3,971 by memory (half of 2,048 MiB at 264 KiB a connection)",
    );
  });

  it('keeps a floor when the process has almost no descriptors or memory', () => {
    expect(connectionLimits(config, 256, 32 * GiB).total).toBe(32);
    expect(connectionLimits(config, 1024, 1_000_000).total).toBe(32);
  });
});

describe('productionWarnings', () => {
  it('warns of an empty HTTP_TRUST_PROXY, not of a set one', () => {
    const env = { NODE_ENV: 'production', CARD_NETWORK_SECRET: 'sk_live_0123456789abcdef0123' };
    expect(productionWarnings(loadConfig(env))).toEqual([expect.stringMatching(/^HTTP_TRUST_PROXY is empty: behind a load balancer/)]);
    expect(productionWarnings(loadConfig({ ...env, HTTP_TRUST_PROXY: '10.0.0.0/8' }))).toEqual([]);
  });
});

/** A connection from `localAddress` and whether the server has closed it. */
interface Peer {
  socket: Socket;
  closed: boolean;
}

describe('limitConnections (real sockets, loopback addresses, a total of 12)', () => {
  let server: Server;
  let table: ConnectionTable;
  let port: number;
  const peers: Peer[] = [];
  const held: ServerResponse[] = [];
  const dominant: string[] = [];
  const events = { evicted: 0, refused: 0 };

  const listen = async (trustedProxies: string[] = []) => {
    // GET /hold keeps its request in flight until the test ends it; anything else is answered at once.
    server = createServer((req, res) => (req.url === '/hold' ? held.push(res) : res.end('ok')));
    table = limitConnections(server, 12, trustedProxies, {
      evicted: () => events.evicted++,
      refused: () => events.refused++,
      dominant: (address) => dominant.push(address),
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  };

  /** Opens a connection from `localAddress` and waits until the server has taken it or closed it. */
  const open = async (localAddress: string): Promise<Peer> => {
    const before = table.open();
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    const peer: Peer = { socket, closed: false };
    socket.on('error', () => undefined);
    socket.on('close', () => (peer.closed = true));
    // Answers are read and dropped: a socket with unread bytes never sees the server's close.
    socket.resume();
    peers.push(peer);
    const seen = events.evicted + events.refused;
    await waitFor(`the server to take or close a connection from ${localAddress}`, () => table.open() > before || events.evicted + events.refused > seen || peer.closed);
    return peer;
  };
  const openMany = async (localAddress: string, count: number) => {
    const opened: Peer[] = [];
    for (let i = 0; i < count; i++) opened.push(await open(localAddress));
    return opened;
  };
  /** A request on `peer`'s connection: answered at once, or held in flight (`/hold`). */
  const send = (peer: Peer, path: '/' | '/hold') => peer.socket.write(`GET ${path} HTTP/1.1\r\nHost: test\r\n\r\n`);
  const stillOpen = (list: Peer[]) => list.filter((p) => !p.closed).length;
  const closedSoon = (peer: Peer) => waitFor('the connection closed by the server', () => peer.closed);

  afterEach(async () => {
    for (const res of held.splice(0)) res.end();
    for (const p of peers.splice(0)) p.socket.destroy();
    dominant.splice(0);
    Object.assign(events, { evicted: 0, refused: 0 });
    await new Promise((r) => server.close(r));
  });

  it('lets one address alone take every connection; at the total its new one replaces its own oldest idle one', async () => {
    await listen();
    const first = await openMany('127.0.0.1', 12);
    expect(table.open()).toBe(12);
    expect(first.filter((p) => p.closed)).toHaveLength(0);
    const thirteenth = await open('127.0.0.1');
    await closedSoon(first[0]);
    expect(thirteenth.closed).toBe(false);
    expect(first.slice(1).filter((p) => p.closed)).toHaveLength(0);
    expect(events).toEqual({ evicted: 1, refused: 0 });
  });

  it('gives a new address a place at the total: the oldest idle connection of the address holding the most is closed', async () => {
    await listen();
    const a = await openMany('127.0.0.1', 5);
    const b = await openMany('127.0.0.2', 4);
    const c = await openMany('127.0.0.3', 3);
    // A keep-alive connection that just served a request is idle, but the newest of its address.
    send(a[0], '/');
    await waitFor('the answer on the first connection', () => a[0].socket.bytesRead > 0);
    const fresh = await open('127.0.0.9');
    await closedSoon(a[1]);
    expect(fresh.closed).toBe(false);
    expect(stillOpen(a)).toBe(4);
    // The largest addresses give way until no address holds more than the newcomer's would;
    // then the newcomer's address replaces its own oldest. The smallest is never touched.
    const more = [await open('127.0.0.9'), await open('127.0.0.9')];
    await waitFor('a and b down to 3 each', () => stillOpen(a) === 3 && stillOpen(b) === 3);
    const fourth = await open('127.0.0.9');
    await closedSoon(fresh);
    expect(stillOpen([...more, fourth])).toBe(3);
    expect(stillOpen(c)).toBe(3);
    expect(table.open()).toBe(12);
  });

  it('never closes a connection with a request in flight: a newcomer is refused until one ends', async () => {
    await listen();
    const busy = await openMany('127.0.0.1', 12);
    for (const p of busy) send(p, '/hold');
    await waitFor('every request in flight', () => held.length === 12);
    const refused = await open('127.0.0.2');
    await closedSoon(refused);
    expect(busy.filter((p) => p.closed)).toHaveLength(0);
    expect(events).toEqual({ evicted: 0, refused: 1 });
    // The first connection's request answered: it is idle again, and the next newcomer takes its place.
    held.find((res) => res.req.socket.remotePort === busy[0].socket.localPort)?.end();
    await waitFor('the answer on the first connection', () => busy[0].socket.bytesRead > 0);
    const next = await open('127.0.0.2');
    await closedSoon(busy[0]);
    expect(next.closed).toBe(false);
  });

  it("lets an address's newcomer replace its own last idle connection, and the next one that", async () => {
    await listen();
    const busy = await openMany('127.0.0.1', 11);
    for (const p of busy) send(p, '/hold');
    await waitFor('every request in flight', () => held.length === 11);
    const [only] = await openMany('127.0.0.2', 1);
    const first = await open('127.0.0.2');
    await closedSoon(only);
    const second = await open('127.0.0.2');
    await closedSoon(first);
    expect(second.closed).toBe(false);
    expect(events).toEqual({ evicted: 2, refused: 0 });
    expect(table.open()).toBe(12);
  });

  it('lets a connection still receiving its body make room when none is idle, the oldest first', async () => {
    await listen();
    const busy = await openMany('127.0.0.1', 10);
    for (const p of busy) send(p, '/hold');
    const slow = await openMany('127.0.0.1', 2);
    // Headers whole, 10 of the 100 bytes of the body: the handler is called, the message is not complete.
    for (const p of slow) p.socket.write('POST /hold HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\n0123456789');
    await waitFor('every request in flight', () => held.length === 12);
    const first = await open('127.0.0.2');
    await closedSoon(slow[0]);
    const second = await open('127.0.0.2');
    await closedSoon(slow[1]);
    expect([first, second, ...busy].filter((p) => p.closed)).toHaveLength(0);
    // Nothing left to take from the larger address: the newcomer's own oldest idle one makes room.
    const third = await open('127.0.0.2');
    await closedSoon(first);
    expect([second, third, ...busy].filter((p) => p.closed)).toHaveLength(0);
    expect(events).toEqual({ evicted: 3, refused: 0 });
  });

  it('reports an untrusted address holding more than half the connections; a trusted proxy is not reported, and shares like any address', async () => {
    await listen(['127.0.0.5']);
    const proxy = await openMany('127.0.0.5', 4);
    expect(dominant).toEqual([]);
    await openMany('127.0.0.1', 4);
    expect(dominant).toEqual([]);
    const direct = [...(await openMany('127.0.0.1', 4))];
    // 5 of 9, 6 of 10, 7 of 11, 8 of 12.
    expect(dominant).toEqual(Array(4).fill('127.0.0.1'));
    expect(table.largestUntrusted()).toEqual({ address: '127.0.0.1', held: 8 });
    // At the total, the proxy's new connection takes the place of the largest address's oldest.
    const next = await open('127.0.0.5');
    await waitFor('one direct connection closed', () => table.largestUntrusted()?.held === 7);
    expect(stillOpen([...proxy, next])).toBe(5);
    expect(stillOpen(direct)).toBe(4);
    expect(events).toEqual({ evicted: 1, refused: 0 });
  });

  it('serves HTTP on the connections it keeps', async () => {
    await listen();
    const status = await new Promise<number>((resolve, reject) => {
      request({ port, host: '127.0.0.1', localAddress: '127.0.0.4', path: '/' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(200);
  });
});
