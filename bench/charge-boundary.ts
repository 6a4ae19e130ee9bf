import { RaceResult, race, startServer } from './http';
import { openBenchDatabase } from './lib/database';
import { PaymentLoadRun, ProbeSummary, paymentLoad, startNetwork } from './lib/payment-load';
import { round } from './lib/stats';

/**
 * §7 The charge boundary under a slow card network. CARD_NETWORK_DELAY=300ms,
 * `clients` concurrent clients posting fresh payments for `seconds`, while
 * GET /health and GET /payments?limit=1 are probed every 100 ms. Two designs on
 * one server, one after the other:
 * - phased: POST /payments, the real route: no connection or lock is held while
 *   the network answers;
 * - pool-bound: POST /bench/pool-bound-payments, the same work in one
 *   transaction held across the network call (the design before phases).
 */
export interface BoundaryRun extends PaymentLoadRun {
  design: 'phased' | 'pool-bound';
  health: ProbeSummary;
  listing: ProbeSummary;
}

export interface BoundaryResult {
  delay: string;
  clients: number;
  runs: BoundaryRun[];
  /** Payments per second, phased over pool-bound. */
  speedup: number;
  /** 100 identical payments at once on a route with `@Idempotent({ wait: '2s' })`, the owner busy for the network's delay. */
  waitPileup: RaceResult;
}

async function measure(port: number, design: BoundaryRun['design'], clients: number, seconds: number): Promise<BoundaryRun> {
  const route = design === 'phased' ? '/payments' : '/bench/pool-bound-payments';
  const run = await paymentLoad(port, { route, keyed: design === 'phased', clients, seconds, probes: { listing: true } });
  return { design, ...run, health: run.health!, listing: run.listing! };
}

export async function chargeBoundary(databaseUrl: string, options: { clients: number; seconds: number; delay: string }): Promise<BoundaryResult> {
  const network = await startNetwork(options.delay);
  const server = await startServer(databaseUrl, {
    CARD_NETWORK_URL: network.url,
    DATABASE_POOL_SIZE: '20',
    // The app's default unless the bench is asked to try another.
    ...(process.env.BENCH_PAYMENTS_CONCURRENCY ? { PAYMENTS_CONCURRENCY: process.env.BENCH_PAYMENTS_CONCURRENCY } : {}),
  });
  try {
    // A short warm-up of both routes (JIT, pool, prepared statements).
    await measure(server.port, 'phased', 20, 2);
    await measure(server.port, 'pool-bound', 20, 2);
    const phased = await measure(server.port, 'phased', options.clients, options.seconds);
    const poolBound = await measure(server.port, 'pool-bound', options.clients, options.seconds);
    const waitPileup = await race(server.port, 100, 3, '/bench/waiting-payments');
    return {
      delay: options.delay,
      clients: options.clients,
      runs: [phased, poolBound],
      speedup: round(phased.paymentsPerSecond / Math.max(poolBound.paymentsPerSecond, 0.1), 2),
      waitPileup,
    };
  } finally {
    await server.stop();
    network.stop();
  }
}

/** `npm run bench:boundary`: this section alone, printed as JSON (the full run records it too). */
if (require.main === module) {
  void (async () => {
    const db = await openBenchDatabase((m: string) => process.stderr.write(`[bench] ${m}\n`));
    try {
      const seconds = Number(process.env.BENCH_BOUNDARY_SECONDS ?? 15);
      const clients = Number(process.env.BENCH_BOUNDARY_CLIENTS ?? 200);
      console.log(JSON.stringify(await chargeBoundary(db.url, { clients, seconds, delay: '300ms' }), null, 2));
    } finally {
      await db.stop();
    }
  })();
}
