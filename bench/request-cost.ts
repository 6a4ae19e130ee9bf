import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { Agent } from 'node:http';
import { Client } from 'pg';
import { startServer } from './http';
import { openBenchDatabase } from './lib/database';
import { newKeys, ORDER, ORDER_HEADERS } from './lib/order-load';
import { call } from './lib/payment-load';
import { fmt, round, table } from './lib/stats';

/**
 * §11 Where a new key's time goes (`npm run bench:request-cost`). POST
 * /orders's handler (one INSERT) behind five routes of one server:
 * - no key, autocommitted: the ceiling;
 * - no key, in a transaction of its own (`START TRANSACTION`, the INSERT, `COMMIT`);
 * - the one-commit key's five statements sent by the handler itself (the
 *   claim and the key's INSERT around the order's), none of the library's
 *   work: one commit less this route is what the library itself costs;
 * - the durable claim (`@Idempotent({ commit: 'durable' })`);
 * - one commit (the app's POST /orders, `commit: 'one'`).
 * Each route: the statements the server's connections send per request
 * (SqlCounter, on a server of its own, `counted` requests one at a time); then
 * autocannon, 20 connections and a fresh key a request, in `slices` interleaved
 * slices of `seconds` (each starting at the next route), on a server that
 * counts nothing, reading the CPU time the server process and the PostgreSQL
 * server (its postmaster and every child) used in each slice from /proc
 * (Linux; with a PostgreSQL on another host, its CPU reads n/a). CPU per request is what decides the ratios on a host where the
 * app, PostgreSQL and the load share the cores.
 */
export interface CostedRoute {
  route: string;
  path: string;
  statements: number;
  commits: number;
  reqPerSec: number;
  perSlice: number[];
  /** CPU milliseconds per answered request. */
  serverCpuMs: number;
  postgresCpuMs: number | null;
  /** reqPerSec / the no-key route's. */
  ofCeiling: number;
  non2xx: number;
  errors: number;
}

export interface RequestCostResult {
  seconds: number;
  slices: number;
  counted: number;
  routes: CostedRoute[];
}

const ROUTES = [
  { route: 'no key, autocommit', path: '/bench/orders' },
  { route: 'no key, own transaction', path: '/bench/transaction-orders' },
  { route: 'five statements, no library', path: '/bench/five-statement-orders' },
  { route: 'durable claim', path: '/bench/durable-orders' },
  { route: 'one commit', path: '/orders' },
];

const CLOCK_TICKS_PER_SECOND = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

/** A process's user + system CPU, ms, and its parent's pid; null once it is gone. */
function processStat(pid: number): { cpuMs: number; ppid: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state ppid … utime(14) stime(15).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND };
  } catch {
    return null;
  }
}

/** CPU ms of the postmaster and all its children (backends, WAL writer, checkpointer …). */
function postgresCpuMs(postmaster: number): number {
  let total = processStat(postmaster)?.cpuMs ?? 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = processStat(Number(entry));
    if (s?.ppid === postmaster) total += s.cpuMs;
  }
  return total;
}

/** The postmaster's pid, when the database runs on this host: the parent of our backend. */
async function findPostmaster(databaseUrl: string): Promise<number | null> {
  const c = new Client({ connectionString: databaseUrl });
  await c.connect();
  try {
    const { rows } = await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const backend = processStat(rows[0].pid);
    return backend && processStat(backend.ppid) ? backend.ppid : null;
  } catch {
    return null;
  } finally {
    await c.end();
  }
}

export async function requestCost(databaseUrl: string, options: { seconds: number; slices: number; counted: number; log(m: string): void }): Promise<RequestCostResult> {
  const counts = new Map<string, { statements: number; commits: number }>();
  const counting = await startServer(databaseUrl, {}, { countSql: true });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const post = (path: string) => call(agent, counting.port, 'POST', path, { ...ORDER_HEADERS, 'idempotency-key': randomUUID() }, ORDER);
  try {
    for (const { path } of ROUTES) {
      for (let i = 0; i < 20; i++) await post(path); // warm
      const { sql } = await counting.countSql(async () => {
        for (let i = 0; i < options.counted; i++) {
          const { status } = await post(path);
          if (status !== 201) throw new Error(`POST ${path} answered ${status}`);
        }
      });
      counts.set(path, { statements: sql.statements / options.counted, commits: (sql.commits + sql.autocommits) / options.counted });
    }
  } finally {
    agent.destroy();
    await counting.stop();
  }

  const postmaster = await findPostmaster(databaseUrl);
  const server = await startServer(databaseUrl);
  const totals = new Map(ROUTES.map((r) => [r.path, { answered: 0, seconds: 0, serverMs: 0, postgresMs: 0, perSlice: [] as number[], non2xx: 0, errors: 0 }]));
  try {
    for (const { path } of ROUTES) await newKeys(server.port, 3, path); // warm
    for (let slice = 0; slice < options.slices; slice++) {
      // Each slice starts at the next route, so no route is always the first after a pause.
      for (const { route, path } of ROUTES.map((_, i) => ROUTES[(i + slice) % ROUTES.length])) {
        const t = totals.get(path)!;
        const server0 = processStat(server.pid)?.cpuMs ?? NaN;
        const pg0 = postmaster ? postgresCpuMs(postmaster) : NaN;
        const r = await newKeys(server.port, options.seconds, path);
        const answered = r.requests - r.non2xx;
        t.serverMs += (processStat(server.pid)?.cpuMs ?? NaN) - server0;
        t.postgresMs += (postmaster ? postgresCpuMs(postmaster) : NaN) - pg0;
        t.answered += answered;
        t.seconds += r.seconds;
        t.non2xx += r.non2xx;
        t.errors += r.errors;
        t.perSlice.push(round(answered / r.seconds, 1));
        options.log(`§11 slice ${slice + 1} ${route}: ${round(answered / r.seconds, 1)} req/s`);
      }
    }
  } finally {
    await server.stop();
  }

  const ceiling = totals.get(ROUTES[0].path)!;
  const ceilingRate = ceiling.answered / ceiling.seconds;
  return {
    seconds: options.seconds,
    slices: options.slices,
    counted: options.counted,
    routes: ROUTES.map(({ route, path }) => {
      const t = totals.get(path)!;
      const rate = t.answered / t.seconds;
      return {
        route,
        path,
        ...counts.get(path)!,
        reqPerSec: round(rate, 1),
        perSlice: t.perSlice,
        serverCpuMs: round(t.serverMs / t.answered, 3),
        postgresCpuMs: postmaster ? round(t.postgresMs / t.answered, 3) : null,
        ofCeiling: round(rate / ceilingRate, 2),
        non2xx: t.non2xx,
        errors: t.errors,
      };
    }),
  };
}

export function requestCostReport(r: RequestCostResult): string[] {
  return [
    `§11 where a new key's time goes: POST /orders's handler, 20 connections, ${r.slices} × ${r.seconds} s per route, interleaved; statements counted over ${r.counted} requests`,
    table(
      ['route', 'statements', 'commits', 'req/s (slices)', 'of the ceiling', 'server CPU ms/request', 'PostgreSQL CPU ms/request', 'non-2xx', 'errors'],
      r.routes.map((x) => [
        x.route,
        fmt(x.statements),
        fmt(x.commits),
        `${fmt(x.reqPerSec, 0)} (${x.perSlice.map((v) => fmt(v, 0)).join(' · ')})`,
        fmt(x.ofCeiling),
        fmt(x.serverCpuMs, 3),
        x.postgresCpuMs === null ? 'n/a' : fmt(x.postgresCpuMs, 3),
        x.non2xx,
        x.errors,
      ]),
    ),
  ];
}

/** `npm run bench:request-cost`: this section alone; the table on stderr, JSON on stdout. */
if (require.main === module) {
  void (async () => {
    const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
    const db = await openBenchDatabase(log);
    try {
      const result = await requestCost(db.url, {
        seconds: Number(process.env.BENCH_COST_SECONDS ?? 8),
        slices: Number(process.env.BENCH_COST_SLICES ?? 2),
        counted: Number(process.env.BENCH_COST_COUNTED ?? 200),
        log,
      });
      process.stderr.write(`${requestCostReport(result).join('\n')}\n`);
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await db.stop();
    }
  })();
}
