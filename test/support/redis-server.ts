// One real redis-server for the whole jest run, like the embedded PostgreSQL:
// started by globalSetup on a free port of 127.0.0.1 in a temporary folder
// (`--save '' --appendonly no`: nothing is written to disk), stopped by
// globalTeardown, its URL handed to the workers as TEST_REDIS_URL. With REDIS_URL
// already set, that server is used instead. Without either, the Redis suites
// skip with one line naming the package to install (redisSuites()), except under
// CI, where they run and fail with redisUrl()'s message: CI must test them.
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suitesNeeding } from './tool-suites';

export const REDIS_MISSING =
  'The Redis suites need a Redis server: install redis-server (Debian/Ubuntu: apt-get install -y redis-server; .ci/run does) or set REDIS_URL=redis://host:port';

export interface TestRedis {
  url: string;
  stop(): Promise<void>;
}

/**
 * `describe` for a suite that needs Redis: the real one when the run has a
 * Redis or CI is set, else `describe.skip`, after one line saying what to install.
 */
export function redisSuites(): jest.Describe {
  return suitesNeeding('Redis suites', Boolean(process.env.TEST_REDIS_URL), REDIS_MISSING);
}

/** Whether the Redis suites run (see redisSuites). */
export function hasRedisSuites(): boolean {
  return Boolean(process.env.TEST_REDIS_URL || process.env.CI);
}

/** The URL of the run's Redis, for a suite that needs one; a failure saying how to get one otherwise. */
export function redisUrl(): string {
  const url = process.env.TEST_REDIS_URL;
  if (!url) throw new Error(`${REDIS_MISSING}${process.env.TEST_REDIS_ERROR ? ` (${process.env.TEST_REDIS_ERROR})` : ''}`);
  return url;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Starts redis-server; undefined (with the reason) when it is not installed. */
export async function startRedisServer(): Promise<TestRedis | { missing: string }> {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) return { missing: 'redis-server is not on PATH' };
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-redis-'));
  const port = await freePort();
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--loglevel', 'warning'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
    await rm(dir, { recursive: true, force: true });
  };
  // Ready when it accepts a connection and answers PING.
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`redis-server exited at startup (${child.exitCode}): ${output.trim()}`);
    }
    if (await pings(port)) return { url: `redis://127.0.0.1:${port}`, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`redis-server did not answer on port ${port} within 10 s: ${output.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function pings(port: number): Promise<boolean> {
  const { Redis } = await import('ioredis');
  const client = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}
