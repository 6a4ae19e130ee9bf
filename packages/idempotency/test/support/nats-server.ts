// A real nats-server with JetStream for a suite: on a free port of 127.0.0.1,
// its store in a temporary folder, stopped and started again on the same port
// and store (a broker outage), removed at the end. Debian's `nats-server`
// package (JetStream since 2.2); .ci/run installs it when missing. Without it
// the NATS suites skip with one line naming the package, except under CI,
// where they run and fail saying so: CI must test them.
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { AddressInfo, connect as connectSocket, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const NATS_MISSING = 'The NATS suites need nats-server: apt-get install -y nats-server (Debian/Ubuntu; .ci/run installs it)';

/** Debian puts it in /usr/sbin, which a user's PATH may lack. */
function natsServerBinary(): string | undefined {
  for (const candidate of ['nats-server', '/usr/sbin/nats-server']) {
    if (!candidate.startsWith('/') || existsSync(candidate)) {
      const probe = spawnSync(candidate, ['--version'], { encoding: 'utf8' });
      if (!probe.error && probe.status === 0) return candidate;
    }
  }
  return undefined;
}

/** `describe` for a suite that needs nats-server: the real one when it is installed or CI is set, else `describe.skip` after one line. */
export function natsSuites(): jest.Describe {
  if (natsServerBinary() || process.env.CI) return describe;
  process.stderr.write(`NATS suites skipped: ${NATS_MISSING}\n`);
  return describe.skip;
}

export interface TestNatsServer {
  url: string;
  /** The names of the clients connected now (its monitoring endpoint's /connz). */
  clientNames(): Promise<string[]>;
  /** Stops the server (SIGTERM); its store stays. */
  stop(): Promise<void>;
  /** Starts it again on the same port and store. */
  start(): Promise<void>;
  /** Stops it and removes its store. */
  destroy(): Promise<void>;
}

export async function startNatsServer(): Promise<TestNatsServer> {
  const binary = natsServerBinary();
  if (!binary) throw new Error(NATS_MISSING);
  const dir = await mkdtemp(join(tmpdir(), 'safe-retries-nats-'));
  const port = await freePort();
  const monitor = await freePort();
  let child: ChildProcess | undefined;

  const stop = async () => {
    const running = child;
    child = undefined;
    if (running && running.exitCode === null && running.signalCode === null) {
      running.kill('SIGTERM');
      await once(running, 'exit');
    }
  };
  const start = async () => {
    const started = spawn(binary, ['-js', '-a', '127.0.0.1', '-p', String(port), '-m', String(monitor), '-sd', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = started;
    let output = '';
    started.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    started.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    // Ready when it logs so (JetStream restored from its store, the client port open).
    const deadline = Date.now() + 15_000;
    while (!output.includes('Server is ready')) {
      if (started.exitCode !== null) throw new Error(`nats-server exited at startup (${started.exitCode}): ${output.trim()}`);
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`nats-server was not ready on port ${port} within 15 s: ${output.trim()}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    await accepts(port);
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    clientNames: async () => {
      const connz = (await (await fetch(`http://127.0.0.1:${monitor}/connz`)).json()) as { connections?: { name?: string }[] };
      return (connz.connections ?? []).map((c) => c.name ?? '');
    },
    stop,
    start,
    destroy: async () => {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
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

function accepts(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connectSocket(port, '127.0.0.1', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}
