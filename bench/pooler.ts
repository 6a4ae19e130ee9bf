import { randomUUID } from 'node:crypto';
import { Agent } from 'node:http';
import { Client } from 'pg';
import { startPgBouncer } from '../packages/idempotency/test/support/pgbouncer';
import { call, startNetwork } from './lib/payment-load';
import { BenchServer, startServer } from './http';
import { BENCH_CLIENT, PAYMENT_BODY } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { newKeys } from './lib/order-load';
import { Percentiles, round, summarize } from './lib/stats';

/**
 * §8 Behind PgBouncer. One app server per configuration, each on a database of
 * its own on the same PostgreSQL, measured in interleaved slices:
 * - direct: DATABASE_URL straight to PostgreSQL, the defaults (named
 *   statements, claims with synchronous_commit off);
 * - direct, pooler settings: the same server, DATABASE_PREPARED_STATEMENTS=off
 *   (unnamed statements, claims with the server's synchronous_commit): what
 *   the settings cost without the pooler's hop;
 * - PgBouncer: those settings through PgBouncer 1.18+ in transaction mode,
 *   `poolSize` server connections for the app's 30 (20 + 10 for claims).
 * Two loads: new keys (POST /orders, a fresh key per request, no network call;
 * autocannon, 20 connections) and payments (POST /payments, `clients` clients,
 * two card network calls of 300 ms each). The server connections used are the
 * database's backends (pg_stat_activity), sampled every 20 ms.
 */
export type PoolerConfig = 'direct' | 'direct, pooler settings' | 'PgBouncer';

export interface PoolerRun {
  config: PoolerConfig;
  newKeys: { reqPerSec: number; perSlice: number[]; ms: Percentiles; non2xx: number; errors: number; serverConnections: number; clientConnections?: number };
  payments: { perSecond: number; perSlice: number[]; ms: Percentiles; errors: Record<string, number>; serverConnections: number; clientConnections?: number };
}

export interface PoolerResult {
  pgbouncer: string;
  poolSize: number;
  secondsPerLoad: number;
  slices: number;
  paymentClients: number;
  runs: PoolerRun[];
}

const AUTH = `Bearer ${BENCH_CLIENT.key}`;
const PAYMENT = JSON.stringify(PAYMENT_BODY);

/** The largest number of backends on `database` while `work` runs. */
async function peakBackends<T>(admin: Client, database: string, work: () => Promise<T>): Promise<{ result: T; peak: number }> {
  let peak = 0;
  let running = true;
  const sampler = (async () => {
    while (running) {
      const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, [database]);
      peak = Math.max(peak, rows[0].n);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    return { result: await work(), peak };
  } finally {
    running = false;
    await sampler;
  }
}

function post(agent: Agent, port: number, path: string, body: string): Promise<{ status: number; ms: number }> {
  return call(agent, port, 'POST', path, { authorization: AUTH, 'content-type': 'application/json', 'idempotency-key': randomUUID() }, body);
}

async function payments(port: number, clients: number, seconds: number): Promise<{ done: number; seconds: number; ms: number[]; errors: Record<string, number> }> {
  const agent = new Agent({ keepAlive: true, maxSockets: clients + 2 });
  const deadline = performance.now() + seconds * 1000;
  const ms: number[] = [];
  const errors: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        const a = await post(agent, port, '/payments', PAYMENT);
        if (a.status === 201) ms.push(a.ms);
        else errors[String(a.status)] = (errors[String(a.status)] ?? 0) + 1;
      }
    }),
  );
  agent.destroy();
  return { done: ms.length, seconds: (performance.now() - started) / 1000, ms, errors };
}

export async function poolerBench(serverUrl: string, options: { seconds: number; slices: number; clients: number; poolSize: number; log(m: string): void }): Promise<PoolerResult> {
  const configs: PoolerConfig[] = ['direct', 'direct, pooler settings', 'PgBouncer'];
  const admin = new Client({ connectionString: serverUrl });
  await admin.connect();
  const suffix = randomUUID().replace(/-/g, '').slice(0, 8);
  const databases = configs.map((_, i) => `bench_pooler_${i}_${suffix}`);
  const urlOf = (database: string) => Object.assign(new URL(serverUrl), { pathname: `/${database}` }).toString();
  const servers: BenchServer[] = [];
  const bouncer = await startPgBouncer({ serverUrl, poolSize: options.poolSize });
  const network = await startNetwork('300ms');
  try {
    for (const database of databases) await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(database)}`);
    const envOf = (config: PoolerConfig, database: string): [string, Record<string, string>] => {
      const env = { CARD_NETWORK_URL: network.url, DATABASE_POOL_SIZE: '20' };
      if (config === 'direct') return [urlOf(database), env];
      if (config === 'direct, pooler settings') return [urlOf(database), { ...env, DATABASE_PREPARED_STATEMENTS: 'off' }];
      return [bouncer.url(database), { ...env, DATABASE_PREPARED_STATEMENTS: 'off' }];
    };
    for (const [i, config] of configs.entries()) servers.push(await startServer(...envOf(config, databases[i])));
    options.log(`§8 servers up (PgBouncer ${bouncer.version}, ${options.poolSize} server connections per database)`);

    // Warm-up: JIT, pools, and (direct) the prepared statements.
    for (const server of servers) {
      await newKeys(server.port, 2);
      await payments(server.port, 20, 2);
    }
    const slice = options.seconds / options.slices;
    const keys = configs.map(() => ({ runs: [] as Awaited<ReturnType<typeof newKeys>>[], servers: 0, clients: 0 }));
    const pays = configs.map(() => ({ runs: [] as Awaited<ReturnType<typeof payments>>[], servers: 0, clients: 0 }));
    // The client connections PgBouncer holds for the app (the PgBouncer configuration only).
    const withClients = async <T>(i: number, work: () => Promise<T>) => {
      if (configs[i] !== 'PgBouncer') return { ...(await peakBackends(admin, databases[i], work)), clients: 0 };
      const outer = await bouncer.peak(databases[i], () => peakBackends(admin, databases[i], work));
      return { ...outer.result, clients: outer.clients };
    };
    for (let round = 0; round < options.slices; round++) {
      for (const [i, server] of servers.entries()) {
        const r = await withClients(i, () => newKeys(server.port, slice));
        keys[i].runs.push(r.result);
        keys[i].servers = Math.max(keys[i].servers, r.peak);
        keys[i].clients = Math.max(keys[i].clients, r.clients);
      }
      for (const [i, server] of servers.entries()) {
        const r = await withClients(i, () => payments(server.port, options.clients, slice));
        pays[i].runs.push(r.result);
        pays[i].servers = Math.max(pays[i].servers, r.peak);
        pays[i].clients = Math.max(pays[i].clients, r.clients);
      }
    }
    const runs: PoolerRun[] = configs.map((config, i) => {
      const k = keys[i];
      const p = pays[i];
      const kSeconds = k.runs.reduce((n, r) => n + r.seconds, 0);
      const pSeconds = p.runs.reduce((n, r) => n + r.seconds, 0);
      const errors: Record<string, number> = {};
      for (const r of p.runs) for (const [code, n] of Object.entries(r.errors)) errors[code] = (errors[code] ?? 0) + n;
      return {
        config,
        newKeys: {
          reqPerSec: round(k.runs.reduce((n, r) => n + r.requests, 0) / kSeconds, 1),
          perSlice: k.runs.map((r) => round(r.requests / r.seconds, 1)),
          ms: summarize(k.runs.flatMap((r) => r.latenciesMs)),
          non2xx: k.runs.reduce((n, r) => n + r.non2xx, 0),
          errors: k.runs.reduce((n, r) => n + r.errors, 0),
          serverConnections: k.servers,
          ...(config === 'PgBouncer' ? { clientConnections: k.clients } : {}),
        },
        payments: {
          perSecond: round(p.runs.reduce((n, r) => n + r.done, 0) / pSeconds, 1),
          perSlice: p.runs.map((r) => round(r.done / r.seconds, 1)),
          ms: summarize(p.runs.flatMap((r) => r.ms)),
          errors,
          serverConnections: p.servers,
          ...(config === 'PgBouncer' ? { clientConnections: p.clients } : {}),
        },
      };
    });
    return { pgbouncer: bouncer.version, poolSize: options.poolSize, secondsPerLoad: options.seconds, slices: options.slices, paymentClients: options.clients, runs };
  } finally {
    for (const server of servers) await server.stop().catch(() => undefined);
    network.stop();
    await bouncer.stop();
    for (const database of databases) await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(database)} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

/** `npm run bench:pooler`: this section alone, printed as JSON (the full run records it too). */
if (require.main === module) {
  void (async () => {
    const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
    const db = await openBenchDatabase(log);
    try {
      const result = await poolerBench(db.url, {
        seconds: Number(process.env.BENCH_POOLER_SECONDS ?? 8),
        slices: 2,
        clients: Number(process.env.BENCH_POOLER_CLIENTS ?? 100),
        poolSize: Number(process.env.BENCH_POOLER_SERVER_CONNECTIONS ?? 8),
        log,
      });
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await db.stop();
    }
  })();
}
