import { startServer } from './http';
import { BENCH_CLIENT } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { PaymentLoadRun, ProbeSummary, paymentLoad, startNetwork } from './lib/payment-load';
import { PoolUse } from './lib/pool-meter';
import { SqlCount } from './lib/sql-counter';
import { fmt, round, table } from './lib/stats';

/**
 * §10 Payments under a slow network, in one fixed setup: the card network
 * answers every call after 300 ms (two calls a payment), 100 concurrent clients
 * post fresh payments to POST /payments for `seconds`, the app's pool is
 * DATABASE_POOL_SIZE=5, and GET /health is probed every 100 ms throughout.
 * Twice, with the app's admission defaults: the 100 clients as one API client
 * (one key, as in §7: alone, it takes every PAYMENTS_CONCURRENCY slot), then
 * as 100 API clients (a key each, sharing the slots).
 * Then a shorter counted load (no probes): the statements and commits the
 * server's own connections sent, per payment (SqlCounter in the server process).
 */
export interface SlowNetworkRun extends PaymentLoadRun {
  /** API keys the clients post with: 1 (all the bench client's) or one each. */
  apiKeys: number;
  health: ProbeSummary;
  /** The app's pool (DATABASE_POOL_SIZE) during the run. */
  pool: PoolUse;
}

export interface SlowNetworkResult {
  delay: string;
  clients: number;
  poolSize: number;
  runs: SlowNetworkRun[];
  counted: {
    payments: number;
    sql: SqlCount;
    perPayment: { statements: number; commits: number; autocommits: number; transactions: number; kinds: Record<string, number> };
  };
}

export const SLOW_NETWORK = { delay: '300ms', clients: 100, poolSize: 5 };

/** The API keys of the clients that post with a key each. */
const apiClient = (i: number) => ({ name: `bench-${i}`, key: `sk_bench_client_${String(i).padStart(4, '0')}_0123456789` });

export async function slowNetwork(databaseUrl: string, options: { seconds: number; countedPayments: number }): Promise<SlowNetworkResult> {
  const network = await startNetwork(SLOW_NETWORK.delay);
  const clients = Array.from({ length: SLOW_NETWORK.clients }, (_, i) => apiClient(i));
  const apiKeys = [BENCH_CLIENT, ...clients].map((c) => `${c.name}:${c.key}`).join(',');
  const server = await startServer(
    databaseUrl,
    { CARD_NETWORK_URL: network.url, DATABASE_POOL_SIZE: String(SLOW_NETWORK.poolSize), API_KEYS: apiKeys },
    { countSql: true },
  );
  try {
    const load = { route: '/payments', keyed: true, clients: SLOW_NETWORK.clients };
    const keyEach = (i: number) => clients[i].key;
    // A short warm-up (JIT, the pool, prepared statements, every key's lookup).
    await paymentLoad(server.port, { ...load, seconds: 3, keyOf: keyEach });
    const runs: SlowNetworkRun[] = [];
    for (const keyOf of [undefined, keyEach]) {
      const { result: run, pool } = await server.countSql(() => paymentLoad(server.port, { ...load, keyOf, seconds: options.seconds, probes: { listing: false } }));
      runs.push({ apiKeys: keyOf ? clients.length : 1, ...run, health: run.health!, pool });
    }
    const { result: counted, sql } = await server.countSql(() =>
      paymentLoad(server.port, { ...load, seconds: 60, maxPayments: options.countedPayments }),
    );
    const per = (n: number) => round(n / Math.max(counted.payments, 1), 2);
    return {
      ...SLOW_NETWORK,
      runs,
      counted: {
        payments: counted.payments,
        sql,
        perPayment: {
          statements: per(sql.statements),
          commits: per(sql.commits),
          autocommits: per(sql.autocommits),
          transactions: per(sql.commits + sql.autocommits),
          kinds: Object.fromEntries(Object.entries(sql.kinds).map(([kind, n]) => [kind, per(n)])),
        },
      },
    };
  } finally {
    await server.stop();
    network.stop();
  }
}

/** §10's lines of the bench's printed report. */
export function slowNetworkReport(r: SlowNetworkResult): string[] {
  const c = r.counted;
  return [
    `§10 Slow network: CARD_NETWORK_DELAY=${r.delay}, ${r.clients} clients posting fresh payments, DATABASE_POOL_SIZE=${r.poolSize}, /health probed every 100 ms`,
    table(
      ['clients', 'payments/s', 'payment p50', 'p99', 'errors', '/health 200', '/health p50', '/health p99', 'pool: waiting (max)', 'mean wait ms', 'hold p50 / p90 ms'],
      r.runs.map((x) => [
        x.apiKeys === 1 ? 'one API client' : `${x.apiKeys} API clients`,
        fmt(x.paymentsPerSecond, 1),
        fmt(x.paymentMs.p50, 0),
        fmt(x.paymentMs.p99, 0),
        Object.entries(x.errors).map(([k, v]) => `${k}: ${v}`).join(', ') || '0',
        `${x.health.ok}/${x.health.probes}`,
        fmt(x.health.ms.p50, 1),
        fmt(x.health.ms.p99, 1),
        `${fmt(x.pool.waiting.mean, 1)} (${x.pool.waiting.max})`,
        fmt(x.pool.meanWaitMs, 0),
        `${fmt(x.pool.holdMs.p50, 1)} / ${fmt(x.pool.holdMs.p90, 1)}`,
      ]),
    ),
    `per payment (${c.payments} counted on the server's connections): ${fmt(c.perPayment.statements)} statements, ` +
      `${fmt(c.perPayment.transactions)} commits (${fmt(c.perPayment.commits)} COMMIT + ${fmt(c.perPayment.autocommits)} autocommit); ` +
      Object.entries(c.perPayment.kinds)
        .filter(([, v]) => v >= 0.01)
        .map(([k, v]) => `${fmt(v)} × ${k}`)
        .join(', '),
  ];
}

/** `npm run bench:slownet`: this section alone, printed as JSON (the full run records it too). */
if (require.main === module) {
  void (async () => {
    const db = await openBenchDatabase((m: string) => process.stderr.write(`[bench] ${m}\n`));
    try {
      const seconds = Number(process.env.BENCH_SLOWNET_SECONDS ?? 15);
      const countedPayments = Number(process.env.BENCH_SLOWNET_COUNTED ?? 300);
      const result = await slowNetwork(db.url, { seconds, countedPayments });
      process.stderr.write(`${slowNetworkReport(result).join('\n')}\n`);
      console.log(JSON.stringify(result, null, 2));
    } finally {
      await db.stop();
    }
  })();
}
