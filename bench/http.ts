import { ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { BENCH_CLIENT, PAYMENT_BODY } from './lib/app';
import { PoolUse } from './lib/pool-meter';
import { SqlCount } from './lib/sql-counter';
import { median, msSince, round, summarize } from './lib/stats';

/** The bench's HTTP server in a child process (see server.ts). */
export interface BenchServer {
  port: number;
  pid: number;
  stop(): Promise<void>;
  /**
   * Counts the server's statements and meters its pool while `fn` runs (a
   * server started with `{ countSql: true }`): only its own connections, nothing of the bench's.
   */
  countSql<T>(fn: () => Promise<T>): Promise<{ result: T; sql: SqlCount; pool: PoolUse }>;
}

/** `appEnv`: the app's environment overrides (e.g. the card network's delay). */
export async function startServer(databaseUrl: string, appEnv: Record<string, string> = {}, options: { countSql?: boolean } = {}): Promise<BenchServer> {
  const child: ChildProcess = fork(join(__dirname, 'server.js'), [], {
    env: { ...process.env, BENCH_DATABASE_URL: databaseUrl, BENCH_APP_ENV: JSON.stringify(appEnv), BENCH_COUNT_SQL: options.countSql ? '1' : '0' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  // The server logs 4xx at warn (the race's 409s): keep the tail, show it only on failure.
  const tail: string[] = [];
  const keep = (chunk: Buffer) => {
    tail.push(...chunk.toString().split('\n').filter(Boolean));
    tail.splice(0, Math.max(0, tail.length - 40));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bench server did not start in 60 s:\n${tail.join('\n')}`)), 60_000);
    child.once('message', (m: { port: number }) => {
      clearTimeout(timer);
      resolve(m.port);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`bench server exited with ${code}:\n${tail.join('\n')}`));
    });
  });
  return {
    port,
    pid: child.pid!,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.send('stop');
      }),
    async countSql<T>(fn: () => Promise<T>): Promise<{ result: T; sql: SqlCount; pool: PoolUse }> {
      if (!options.countSql) throw new Error('the bench server was started without countSql');
      const counted = new Promise<{ sql: SqlCount; pool: PoolUse }>((resolve) => {
        const onMessage = (m: { sql?: SqlCount; pool?: PoolUse }) => {
          if (!m.sql || !m.pool) return;
          child.off('message', onMessage);
          resolve({ sql: m.sql, pool: m.pool });
        };
        child.on('message', onMessage);
      });
      child.send('sql-start');
      let result: T;
      try {
        result = await fn();
      } finally {
        child.send('sql-stop');
      }
      return { result, ...(await counted) };
    },
  };
}

const HEADERS = {
  'content-type': 'application/json',
  authorization: `Bearer ${BENCH_CLIENT.key}`,
};
const BODY = JSON.stringify(PAYMENT_BODY);

export interface HttpRun {
  route: string;
  durationS: number;
  requests: number;
  reqPerSec: number;
  /** req/s of each interleaved run. */
  perRunReqPerSec: number[];
  latencyMs: { mean: number; p50: number; p90: number; p99: number; max: number };
  statusCodes: Record<string, number>;
  non2xx: number;
  errors: number;
}

export type Scenario = 'fresh' | 'replay' | 'unprotected';

export const SCENARIOS: Record<Scenario, string> = {
  fresh: 'POST /payments, a fresh key per request',
  replay: 'POST /payments, replays of one completed key',
  unprotected: 'POST /bench/payments (no @Idempotent)',
};

/** One completed key for the replay scenario. */
export async function completedKey(port: number): Promise<string> {
  const key = randomUUID();
  const first = await post(port, key);
  const again = await post(port, key);
  if (first.status !== 201 || again.status !== 201 || !again.replayed) {
    throw new Error(`replay setup failed: ${first.status} then ${again.status} (replayed: ${again.replayed})`);
  }
  return key;
}

/** One autocannon run of `seconds`, with every response's latency (ms, from autocannon's hrtime). */
export interface CannonRun {
  seconds: number;
  requests: number;
  latenciesMs: number[];
  statusCodes: Record<string, number>;
  errors: number;
}

export async function cannon(port: number, scenario: Scenario, seconds: number, connections: number, replayKey: string): Promise<CannonRun> {
  const base = { method: 'POST', headers: HEADERS, body: BODY };
  const requests =
    scenario === 'fresh'
      ? [{ ...base, path: '/payments', setupRequest: (r: object) => ({ ...r, headers: { ...HEADERS, 'idempotency-key': randomUUID() } }) }]
      : scenario === 'replay'
        ? [{ ...base, path: '/payments', headers: { ...HEADERS, 'idempotency-key': replayKey } }]
        : [{ ...base, path: '/bench/payments' }];
  const latenciesMs: number[] = [];
  const instance = autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: seconds, requests, timeout: 10 });
  instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => latenciesMs.push(ms));
  const r = await instance;
  return {
    seconds: r.duration,
    requests: latenciesMs.length,
    latenciesMs,
    statusCodes: Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([k, v]) => [k, Number(v.count)])),
    errors: r.errors,
  };
}

/** The runs of one scenario, merged: req/s over their whole time, percentiles over every response. */
export function merge(scenario: Scenario, runs: CannonRun[]): HttpRun {
  const seconds = runs.reduce((n, r) => n + r.seconds, 0);
  const requests = runs.reduce((n, r) => n + r.requests, 0);
  const statusCodes: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.statusCodes)) statusCodes[k] = (statusCodes[k] ?? 0) + v;
  const l = summarize(runs.flatMap((r) => r.latenciesMs));
  return {
    route: SCENARIOS[scenario],
    durationS: round(seconds, 2),
    requests,
    reqPerSec: round(requests / seconds, 1),
    perRunReqPerSec: runs.map((r) => round(r.requests / r.seconds, 1)),
    latencyMs: { mean: l.mean, p50: l.p50, p90: l.p90, p99: l.p99, max: l.max },
    statusCodes,
    non2xx: Object.entries(statusCodes).filter(([k]) => !k.startsWith('2')).reduce((n, [, v]) => n + v, 0),
    errors: runs.reduce((n, r) => n + r.errors, 0),
  };
}

interface Reply {
  status: number;
  replayed: boolean;
  id?: string;
}

/** One POST /payments on a socket of its own (no keep-alive agent). */
export function post(port: number, key: string, body = BODY, path = '/payments'): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path,
        agent: false,
        headers: { ...HEADERS, 'idempotency-key': key, 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let id: string | undefined;
          try {
            id = (JSON.parse(Buffer.concat(chunks).toString()) as { id?: string }).id;
          } catch {
            id = undefined;
          }
          resolve({ status: res.statusCode ?? 0, replayed: res.headers['idempotent-replayed'] === 'true', id });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface RaceRound {
  allAnsweredMs: number;
  created: number;
  replays: number;
  conflicts409: number;
  other: Record<string, number>;
  distinctPaymentIds: number;
}

export interface RaceResult {
  concurrent: number;
  rounds: RaceRound[];
  medianAllAnsweredMs: number;
  totals: { created: number; replays: number; conflicts409: number; other: number };
}

/** §6 Race cost: `n` identical requests at once, each on its own socket (to `path`, POST /payments by default). */
export async function race(port: number, n: number, rounds: number, path = '/payments'): Promise<RaceResult> {
  const out: RaceRound[] = [];
  for (let i = 0; i < rounds; i++) {
    const key = randomUUID();
    const started = process.hrtime.bigint();
    const replies = await Promise.all(Array.from({ length: n }, () => post(port, key, BODY, path)));
    const allAnsweredMs = round(msSince(started));
    const other: Record<string, number> = {};
    let created = 0;
    let replays = 0;
    let conflicts409 = 0;
    const ids = new Set<string>();
    for (const r of replies) {
      if (r.status === 201 && r.id) ids.add(r.id);
      if (r.status === 201 && !r.replayed) created++;
      else if (r.status === 201) replays++;
      else if (r.status === 409) conflicts409++;
      else other[r.status] = (other[r.status] ?? 0) + 1;
    }
    out.push({ allAnsweredMs, created, replays, conflicts409, other, distinctPaymentIds: ids.size });
  }
  const sum = (f: (r: RaceRound) => number) => out.reduce((s, r) => s + f(r), 0);
  return {
    concurrent: n,
    rounds: out,
    medianAllAnsweredMs: round(median(out.map((r) => r.allAnsweredMs))),
    totals: {
      created: sum((r) => r.created),
      replays: sum((r) => r.replays),
      conflicts409: sum((r) => r.conflicts409),
      other: sum((r) => Object.values(r.other).reduce((a, b) => a + b, 0)),
    },
  };
}
