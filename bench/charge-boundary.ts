import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { RaceResult, race, startServer } from './http';
import { BENCH_CLIENT, PAYMENT_BODY } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { Percentiles, round, sleep, summarize } from './lib/stats';

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
export interface BoundaryRun {
  design: 'phased' | 'pool-bound';
  route: string;
  seconds: number;
  payments: number;
  paymentsPerSecond: number;
  errors: Record<string, number>;
  paymentMs: Percentiles;
  health: { probes: number; ok: number; ms: Percentiles };
  listing: { probes: number; ok: number; ms: Percentiles };
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

const AUTH = `Bearer ${BENCH_CLIENT.key}`;

interface Answer {
  status: number;
  ms: number;
}

function call(agent: Agent, port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent, headers, timeout: 30_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
      res.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
    req.end(body);
  });
}

async function measure(port: number, design: BoundaryRun['design'], clients: number, seconds: number): Promise<BoundaryRun> {
  const route = design === 'phased' ? '/payments' : '/bench/pool-bound-payments';
  const agent = new Agent({ keepAlive: true, maxSockets: clients + 4 });
  const body = JSON.stringify(PAYMENT_BODY);
  const deadline = performance.now() + seconds * 1000;
  const paymentMs: number[] = [];
  const errors: Record<string, number> = {};
  let payments = 0;

  const client = async () => {
    while (performance.now() < deadline) {
      const headers: Record<string, string> = { authorization: AUTH, 'content-type': 'application/json' };
      if (design === 'phased') headers['idempotency-key'] = randomUUID();
      const answer = await call(agent, port, 'POST', route, headers, body);
      if (answer.status === 201) {
        payments++;
        paymentMs.push(answer.ms);
      } else {
        errors[String(answer.status)] = (errors[String(answer.status)] ?? 0) + 1;
      }
    }
  };
  // Probes on their own agent: they never queue behind the payments' sockets.
  const probeAgent = new Agent({ keepAlive: true, maxSockets: 4 });
  const probes = { health: [] as Answer[], listing: [] as Answer[] };
  const probe = async () => {
    while (performance.now() < deadline) {
      const tick = sleep(100);
      const [health, listing] = await Promise.all([
        call(probeAgent, port, 'GET', '/health', {}),
        call(probeAgent, port, 'GET', '/payments?limit=1', { authorization: AUTH }),
      ]);
      probes.health.push(health);
      probes.listing.push(listing);
      await tick;
    }
  };
  const started = performance.now();
  await Promise.all([...Array.from({ length: clients }, client), probe()]);
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  probeAgent.destroy();
  const summary = (answers: Answer[]) => ({
    probes: answers.length,
    ok: answers.filter((a) => a.status === 200).length,
    ms: summarize(answers.map((a) => a.ms)),
  });
  return {
    design,
    route: `POST ${route}`,
    seconds: round(elapsed, 1),
    payments,
    paymentsPerSecond: round(payments / elapsed, 1),
    errors,
    paymentMs: summarize(paymentMs),
    health: summary(probes.health),
    listing: summary(probes.listing),
  };
}

/**
 * The card network as a process of its own, as a real provider is: its work is not the app's.
 * The simulator workspace's built entry, found by its package name (`npm run build` builds it).
 */
export async function startNetwork(delay: string): Promise<{ url: string; stop(): void }> {
  const child = fork(require.resolve('@safe-retries/card-network-simulator/main'), [], {
    env: { PATH: process.env.PATH ?? '', CARD_NETWORK_PORT: '0', CARD_NETWORK_DELAY: delay },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const listening = /listening on (http:\/\/\S+)/.exec(out);
      if (listening) resolve(listening[1]);
    });
    child.once('exit', (code) => reject(new Error(`the card network exited with ${code}`)));
  });
  return { url, stop: () => child.kill('SIGTERM') };
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
