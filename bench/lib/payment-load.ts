import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { BENCH_CLIENT, PAYMENT_BODY } from './app';
import { Percentiles, round, sleep, summarize } from './stats';

/**
 * Payments posted by concurrent clients against a bench server, with the
 * public and the read routes probed beside them: the load of §7 (the charge
 * boundary) and §10 (the slow network). Each client posts one payment after
 * another on its own keep-alive socket; the probes run on an agent of their
 * own, so they never queue behind the payments' sockets.
 */
export interface PaymentLoadOptions {
  /** The route, e.g. '/payments'. */
  route: string;
  /** A fresh Idempotency-Key on every request. */
  keyed: boolean;
  clients: number;
  seconds: number;
  /** Stop once this many payments have been sent (the seconds still bound the run). */
  maxPayments?: number;
  /** The API key each client posts with (by its index); the bench client's for all when absent. */
  keyOf?: (client: number) => string;
  /** Probe GET /health (and GET /payments?limit=1 when `listing`) every 100 ms; none when absent. */
  probes?: { listing: boolean };
}

export interface ProbeSummary {
  probes: number;
  ok: number;
  ms: Percentiles;
}

export interface PaymentLoadRun {
  route: string;
  seconds: number;
  payments: number;
  paymentsPerSecond: number;
  errors: Record<string, number>;
  paymentMs: Percentiles;
  health?: ProbeSummary;
  listing?: ProbeSummary;
}

const AUTH = `Bearer ${BENCH_CLIENT.key}`;

interface Answer {
  status: number;
  ms: number;
}

/** One HTTP call on `agent`: its status (0 when it failed) and how long it took. */
export function call(agent: Agent, port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
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

export async function paymentLoad(port: number, options: PaymentLoadOptions): Promise<PaymentLoadRun> {
  const { route, keyed, clients, seconds, maxPayments = Infinity, probes, keyOf = () => BENCH_CLIENT.key } = options;
  const agent = new Agent({ keepAlive: true, maxSockets: clients + 4 });
  const body = JSON.stringify(PAYMENT_BODY);
  const deadline = performance.now() + seconds * 1000;
  const paymentMs: number[] = [];
  const errors: Record<string, number> = {};
  let payments = 0;
  let sent = 0;
  let running = clients;

  const client = async (_: unknown, index: number) => {
    const authorization = `Bearer ${keyOf(index)}`;
    while (performance.now() < deadline && sent < maxPayments) {
      sent++;
      const headers: Record<string, string> = { authorization, 'content-type': 'application/json' };
      if (keyed) headers['idempotency-key'] = randomUUID();
      const answer = await call(agent, port, 'POST', route, headers, body);
      if (answer.status === 201) {
        payments++;
        paymentMs.push(answer.ms);
      } else {
        errors[String(answer.status)] = (errors[String(answer.status)] ?? 0) + 1;
      }
    }
    running--;
  };
  const probeAgent = new Agent({ keepAlive: true, maxSockets: 4 });
  const answers = { health: [] as Answer[], listing: [] as Answer[] };
  const probe = async () => {
    if (!probes) return;
    while (performance.now() < deadline && running > 0) {
      const tick = sleep(100);
      const [health, listing] = await Promise.all([
        call(probeAgent, port, 'GET', '/health', {}),
        probes.listing ? call(probeAgent, port, 'GET', '/payments?limit=1', { authorization: AUTH }) : undefined,
      ]);
      answers.health.push(health);
      if (listing) answers.listing.push(listing);
      await tick;
    }
  };
  const started = performance.now();
  await Promise.all([...Array.from({ length: clients }, client), probe()]);
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  probeAgent.destroy();
  const summary = (list: Answer[]): ProbeSummary => ({
    probes: list.length,
    ok: list.filter((a) => a.status === 200).length,
    ms: summarize(list.map((a) => a.ms)),
  });
  return {
    route: `POST ${route}`,
    seconds: round(elapsed, 1),
    payments,
    paymentsPerSecond: round(payments / elapsed, 1),
    errors,
    paymentMs: summarize(paymentMs),
    ...(probes ? { health: summary(answers.health) } : {}),
    ...(probes?.listing ? { listing: summary(answers.listing) } : {}),
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
