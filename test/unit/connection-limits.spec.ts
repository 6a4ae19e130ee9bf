import { mkdtempSync, writeFileSync } from 'node:fs';
import { Server, Socket, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectionLimits, descriptorLimit, limitConnections } from '../../src/common/connection-limits';
import { loadConfig } from '../../src/config/config';
import { waitFor } from '../support/http-client';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            4096                 524288               files
Max locked memory         8388608              8388608              bytes
`;

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

describe('connectionLimits', () => {
  const config = loadConfig({ DATABASE_POOL_SIZE: '20', PAYMENTS_CONCURRENCY: '90' });

  it('keeps descriptors for the process (256, its pools, its charge slots); one address gets a sixteenth', () => {
    expect(connectionLimits(config, 1024)).toEqual({ total: 1024 - 376, perAddress: 40 });
    expect(connectionLimits(config, 20_000)).toEqual({ total: 20_000 - 376, perAddress: 1226 });
  });

  it('keeps a floor when the process has almost no descriptors', () => {
    expect(connectionLimits(config, 256)).toEqual({ total: 32, perAddress: 8 });
  });
});

/** Connections from `localAddress`: how many the server kept open, how many it closed at once. */
async function open(port: number, localAddress: string, count: number): Promise<{ kept: Socket[]; closed: number }> {
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve) => {
          const socket = connect({ port, host: '127.0.0.1', localAddress }, () => resolve(socket));
          socket.on('error', () => undefined);
        }),
    ),
  );
  // One more, taken after all of them: by its answer, the server has dealt with every one.
  await new Promise<void>((resolve) => {
    const probe = connect({ port, host: '127.0.0.1', localAddress }, () => probe.write('ping'));
    probe.on('data', () => probe.destroy());
    probe.on('error', () => undefined);
    probe.on('close', () => resolve());
  });
  await new Promise((r) => setImmediate(r));
  return { kept: sockets.filter((s) => !s.destroyed && s.readable), closed: sockets.filter((s) => s.destroyed || !s.readable).length };
}

describe('limitConnections (real sockets, loopback addresses)', () => {
  let server: Server;
  let port: number;
  const sockets: Socket[] = [];

  const listen = async (trustedProxies: string[]) => {
    server = createServer((socket) => socket.on('data', () => socket.write('pong')));
    limitConnections(server, { total: 12, perAddress: 4 }, trustedProxies);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  };
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await new Promise((r) => server.close(r));
  });

  it('keeps perAddress connections of one address, closes the next at once; another address is served', async () => {
    await listen([]);
    const one = await open(port, '127.0.0.1', 6);
    sockets.push(...one.kept);
    expect(one.kept).toHaveLength(4);
    const other = await open(port, '127.0.0.2', 2);
    sockets.push(...other.kept);
    expect(other.kept).toHaveLength(2);
  });

  it('counts a closed connection out: its address may open another', async () => {
    await listen([]);
    const first = await open(port, '127.0.0.1', 4);
    first.kept[0].destroy();
    await waitFor('the server to see the connection closed', () => new Promise<boolean>((resolve) => server.getConnections((_e, n) => resolve(n === 3))));
    const again = await open(port, '127.0.0.1', 1);
    sockets.push(...first.kept, ...again.kept);
    expect(again.kept).toHaveLength(1);
  });

  it('counts a trusted proxy toward the total only; the total holds for everyone', async () => {
    await listen(['127.0.0.5', '127.0.1.0/24']);
    const proxy = await open(port, '127.0.0.5', 8);
    const subnet = await open(port, '127.0.1.9', 2);
    sockets.push(...proxy.kept, ...subnet.kept);
    expect(proxy.kept).toHaveLength(8);
    expect(subnet.kept).toHaveLength(2);
    const others = await open(port, '127.0.0.2', 4);
    sockets.push(...others.kept);
    expect(others.kept).toHaveLength(2);
  });
});
