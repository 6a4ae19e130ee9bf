import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { Client } from 'pg';
import { DEFAULT_CARD_NETWORK_SECRET } from '../src/config/config';
import { Attempt, Lookup, checkHistory, digest, keyOf } from '../test/support/history';
import { startPgBouncer } from '../packages/idempotency/test/support/pgbouncer';
import { startNetwork } from './lib/payment-load';
import { BENCH_CLIENT } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { Percentiles, round, sleep, summarize } from './lib/stats';

/**
 * The fleet soak (`npm run bench:fleet`): `instances` app processes (the built
 * dist-bench/src/main.js) behind one PgBouncer in transaction mode
 * (`serverConnections` server connections), one card network process (50 ms a
 * call), and `clients` clients paying for `seconds`, each payment a fresh key
 * retried with that key until it is answered 201 (on connection errors, 5xx,
 * 409 after Retry-After), on whichever instance is up. `killEvery` seconds
 * after the fleet is whole, one instance is SIGKILLed and started again at
 * once (one down at a time, mid-payment as the load goes). Then every
 * payment is reconciled with the database (through a direct connection) and
 * the card network's ledger: one payment row, one charge, the id the client
 * was answered. Lost and doubled must both be 0. Every attempt and a final
 * outcome lookup of each key are recorded, and the history checker
 * (test/support/history.ts) must find no violation.
 */
export interface FleetResult {
  pgbouncer: string;
  instances: number;
  serverConnections: number;
  seconds: number;
  clients: number;
  kills: number;
  restartMs: Percentiles;
  operations: number;
  paymentsPerSecond: number;
  /** From the first attempt to the 201. */
  operationMs: Percentiles;
  attempts: { total: number; byAnswer: Record<string, number> };
  peak: { clientConnections: number; serverConnections: number };
  reconciled: { answered: number; unanswered: number; lost: number; doubled: number; wrongId: number; charges: number; rows: number };
  /** The history checker's verdict: violations found (each printed with its key's history). */
  history: { attempts: number; lookups: number; violations: string[] };
}

const AUTH = `Bearer ${BENCH_CLIENT.key}`;
const MAIN = join(__dirname, '../src/main.js');

interface Instance {
  slot: number;
  child: ChildProcess;
  port: number;
  up: boolean;
}

/** One app process, ready when its /health answers 200. */
async function startInstance(slot: number, env: Record<string, string>): Promise<Instance> {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const onData = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const deadline = Date.now() + 60_000;
  let port = 0;
  while (!port) {
    if (child.exitCode !== null) throw new Error(`instance ${slot} exited with ${child.exitCode}:\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`instance ${slot} did not start in 60 s:\n${output}`);
    }
    port = Number(/"msg":"listening on :(\d+)"/.exec(output)?.[1] ?? 0);
    if (!port) await sleep(50);
  }
  while ((await get(port, '/health')) !== 200) {
    if (Date.now() > deadline) throw new Error(`instance ${slot} never answered /health 200:\n${output}`);
    await sleep(100);
  }
  return { slot, child, port, up: true };
}

function get(port: number, path: string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, timeout: 2_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
    req.end();
  });
}

interface Answer {
  status: number;
  retryAfter?: number;
  id?: string;
  /** The problem's code, for an error. */
  code?: string;
  /** Digest of the answer's bytes. */
  digest?: string;
  replayed?: boolean;
}

function pay(agent: Agent, port: number, key: string, body: string): Promise<Answer> {
  return new Promise((resolve) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/payments', agent, timeout: 15_000, headers: { authorization: AUTH, 'content-type': 'application/json', 'idempotency-key': key } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', () => resolve({ status: 0 }));
        res.on('end', () => {
          let parsed: { id?: string; code?: string };
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString()) as { id?: string; code?: string };
          } catch {
            parsed = {};
          }
          const status = res.statusCode ?? 0;
          resolve({
            status,
            retryAfter: Number(res.headers['retry-after'] ?? NaN),
            id: status === 201 ? parsed.id : undefined,
            code: parsed.code,
            digest: digest(Buffer.concat(chunks)),
            replayed: res.headers['idempotent-replayed'] === 'true',
          });
        });
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0 }));
    req.end(body);
  });
}

/** Every succeeded charge at the card network, by description. */
async function chargesByDescription(networkUrl: string, prefix: string): Promise<Map<string, number>> {
  const charges = new Map<string, number>();
  let after: string | undefined;
  for (;;) {
    const res = await fetch(`${networkUrl}/v1/payment_intents?limit=100${after ? `&starting_after=${after}` : ''}`, {
      headers: { Authorization: `Bearer ${DEFAULT_CARD_NETWORK_SECRET}` },
    });
    const page = (await res.json()) as { data: { id: string; status: string; description: string | null }[]; has_more: boolean };
    for (const intent of page.data) {
      if (intent.status === 'succeeded' && intent.description?.startsWith(prefix)) charges.set(intent.description, (charges.get(intent.description) ?? 0) + 1);
    }
    if (!page.has_more || page.data.length === 0) return charges;
    after = page.data[page.data.length - 1].id;
  }
}

const LEASE_MS = 3_000;
/** The recovery job's interval: two leases (the configuration derives it). */
const RECOVERY_INTERVAL_MS = 2 * LEASE_MS;

/** What GET /idempotency-keys/{key} answers for a key, when it answers. */
async function lookUp(port: number, key: string): Promise<Lookup | null> {
  const res = await fetch(`http://127.0.0.1:${port}/idempotency-keys/${encodeURIComponent(key)}`, { headers: { authorization: AUTH } }).catch(() => null);
  if (!res?.ok) return null;
  const { state, status } = (await res.json()) as Pick<Lookup, 'state' | 'status'>;
  return { client: BENCH_CLIENT.name, key, at: performance.now(), state, status };
}

export async function fleetSoak(
  serverUrl: string,
  options: { instances: number; serverConnections: number; seconds: number; clients: number; killEvery: number; log(m: string): void },
): Promise<FleetResult> {
  const { log } = options;
  const admin = new Client({ connectionString: serverUrl });
  await admin.connect();
  const database = `bench_fleet_${randomUUID().replace(/-/g, '').slice(0, 8)}`;
  await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(database)}`);
  const direct = new Client({ connectionString: Object.assign(new URL(serverUrl), { pathname: `/${database}` }).toString() });
  await direct.connect();
  const bouncer = await startPgBouncer({ serverUrl, poolSize: options.serverConnections });
  const network = await startNetwork('50ms');
  const env = {
    DATABASE_URL: bouncer.url(database),
    DATABASE_PREPARED_STATEMENTS: 'off',
    CARD_NETWORK_URL: network.url,
    CARD_NETWORK_TIMEOUT: '2s',
    CARD_NETWORK_MAX_RETRIES: '0',
    // Recovery every two leases; the purge every 5 s (144 runs a retention).
    IDEMPOTENCY_LEASE: `${LEASE_MS}ms`,
    IDEMPOTENCY_RETENTION: '12m',
    API_KEYS: `${BENCH_CLIENT.name}:${BENCH_CLIENT.key}`,
    LOG_LEVEL: 'error',
    RATE_LIMIT_PER_CLIENT: '1000000000',
  };
  const fleet: Instance[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: options.clients });
  try {
    // All at once on the empty database: the migrations under their lock, through PgBouncer.
    fleet.push(...(await Promise.all(Array.from({ length: options.instances }, (_, slot) => startInstance(slot, env)))));
    log(`fleet: ${options.instances} instances up behind PgBouncer ${bouncer.version} (${options.serverConnections} server connections)`);

    const run = randomUUID().slice(0, 8);
    const prefix = `fleet ${run} `;
    const operations: { description: string; key: string; id?: string; ms?: number }[] = [];
    const byAnswer: Record<string, number> = {};
    const history: Attempt[] = [];
    let attempts = 0;
    let next = 0;
    const loadEnds = performance.now() + options.seconds * 1000;
    // Outstanding payments are still retried after the load, until this.
    const drainEnds = loadEnds + 60_000;
    const pick = () => {
      const up = fleet.filter((i) => i.up);
      return up.length ? up[next++ % up.length] : undefined;
    };

    const client = async () => {
      while (performance.now() < loadEnds) {
        const op: (typeof operations)[number] = { description: `${prefix}${operations.length}`, key: randomUUID() };
        operations.push(op);
        const body = JSON.stringify({ amount: 100 + Math.floor(Math.random() * 9_900), currency: 'usd', source: 'tok_visa', description: op.description });
        const started = performance.now();
        while (performance.now() < drainEnds) {
          const instance = pick();
          if (!instance) {
            await sleep(100);
            continue;
          }
          const sent = performance.now();
          const answer = await pay(agent, instance.port, op.key, body);
          attempts++;
          history.push({
            client: BENCH_CLIENT.name,
            key: op.key,
            body: digest(body),
            started: sent,
            ended: performance.now(),
            status: answer.status === 0 ? null : answer.status,
            answer: answer.status >= 200 && answer.status < 300 ? answer.digest : undefined,
            id: answer.id,
            code: answer.code,
            replayed: answer.replayed,
          });
          const label = answer.status === 0 ? 'connection error' : answer.status === 201 ? '201' : `${answer.status} ${answer.code ?? ''}`.trim();
          byAnswer[label] = (byAnswer[label] ?? 0) + 1;
          if (answer.status === 201) {
            op.id = answer.id;
            op.ms = performance.now() - started;
            break;
          }
          if (answer.status === 400 || answer.status === 422) break; // never retried unchanged (none expected)
          await sleep(answer.status === 409 ? Math.min(1_000, (Number.isFinite(answer.retryAfter) ? answer.retryAfter! : 1) * 1_000) : 200);
        }
      }
    };

    // One instance down at a time: killed, started again at once, and the next kill
    // `killEvery` seconds after it is back.
    let kills = 0;
    const restartMs: number[] = [];
    const chaos = (async () => {
      while (performance.now() + options.killEvery * 1000 < loadEnds) {
        await sleep(options.killEvery * 1000);
        const victim = fleet[Math.floor(Math.random() * fleet.length)];
        victim.up = false;
        victim.child.kill('SIGKILL');
        kills++;
        const restartedAt = performance.now();
        const fresh = await startInstance(victim.slot, env);
        restartMs.push(performance.now() - restartedAt);
        fleet[fleet.indexOf(victim)] = fresh;
      }
    })();

    const loadStarted = performance.now();
    const { clients: peakClients, servers: peakServers } = await bouncer.peak(database, () => Promise.all([...Array.from({ length: options.clients }, client), chaos]));
    const loadSeconds = Math.min(performance.now(), loadEnds) - loadStarted;
    log(`fleet: ${operations.length} payments, ${kills} instances killed and restarted; reconciling`);

    // Reconcile: the database (direct) and the network's ledger, payment by payment.
    const { rows } = await direct.query<{ description: string; ids: string[]; statuses: string[] }>(
      `SELECT description, array_agg(id::text) AS ids, array_agg(status) AS statuses FROM payments WHERE description LIKE $1 GROUP BY description`,
      [`${prefix}%`],
    );
    const inDatabase = new Map(rows.map((r) => [r.description, r]));
    const charges = await chargesByDescription(network.url, prefix);
    let answered = 0;
    let lost = 0;
    let doubled = 0;
    let wrongId = 0;
    for (const op of operations) {
      const row = inDatabase.get(op.description);
      const charged = charges.get(op.description) ?? 0;
      if (op.id) answered++;
      if ((row?.ids.length ?? 0) > 1 || charged > 1) doubled++;
      // A charge without its record, or an answer without its record or charge.
      else if ((charged > 0 && !row) || (op.id && (!row || charged === 0 || row.statuses[0] !== 'succeeded'))) lost++;
      else if (op.id && row && row.ids[0] !== op.id) wrongId++;
    }
    const done = operations.filter((o) => o.ms !== undefined);
    // The history: every attempt, one lookup per key once the fleet is quiet, and what each key left behind.
    const lookups: Lookup[] = [];
    for (const op of operations) {
      const instance = fleet.find((i) => i.up);
      const found = instance && (await lookUp(instance.port, op.key));
      if (found) lookups.push(found);
    }
    const ends = new Map(
      operations.map((op) => [keyOf(BENCH_CLIENT.name, op.key), { effects: charges.get(op.description) ?? 0, recorded: inDatabase.get(op.description)?.ids ?? [] }]),
    );
    // An attempt cut off by a kill may run on until its lease ends and the recovery job takes it over.
    const violations = checkHistory({ attempts: history, lookups, ends }, { mayRunOnForMs: LEASE_MS + 2 * RECOVERY_INTERVAL_MS });
    return {
      pgbouncer: bouncer.version,
      instances: options.instances,
      serverConnections: options.serverConnections,
      seconds: options.seconds,
      clients: options.clients,
      kills,
      restartMs: summarize(restartMs),
      operations: operations.length,
      paymentsPerSecond: round(done.length / (loadSeconds / 1000), 1),
      operationMs: summarize(done.map((o) => o.ms!)),
      attempts: { total: attempts, byAnswer },
      peak: { clientConnections: peakClients, serverConnections: peakServers },
      reconciled: {
        answered,
        unanswered: operations.length - answered,
        lost,
        doubled,
        wrongId,
        charges: [...charges.values()].reduce((a, b) => a + b, 0),
        rows: rows.reduce((n, r) => n + r.ids.length, 0),
      },
      history: { attempts: history.length, lookups: lookups.length, violations },
    };
  } finally {
    agent.destroy();
    for (const instance of fleet) instance.child.kill('SIGTERM');
    await Promise.all(fleet.map((i) => (i.child.exitCode === null && i.child.signalCode === null ? new Promise((r) => i.child.once('exit', r)) : undefined)));
    network.stop();
    await bouncer.stop();
    await direct.end().catch(() => undefined);
    await admin.query(`DROP DATABASE IF EXISTS ${admin.escapeIdentifier(database)} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

if (require.main === module) {
  void (async () => {
    const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
    const db = await openBenchDatabase(log);
    try {
      const result = await fleetSoak(db.url, {
        instances: 4,
        serverConnections: Number(process.env.BENCH_FLEET_SERVER_CONNECTIONS ?? 8),
        seconds: Number(process.env.BENCH_FLEET_SECONDS ?? 60),
        clients: Number(process.env.BENCH_FLEET_CLIENTS ?? 40),
        killEvery: Number(process.env.BENCH_FLEET_KILL_EVERY ?? 6),
        log,
      });
      console.log(JSON.stringify(result, null, 2));
      const { lost, doubled, wrongId, unanswered } = result.reconciled;
      const { violations } = result.history;
      for (const v of violations.slice(0, 10)) log(`history violation: ${v}`);
      log(`fleet soak: ${result.operations} payments, lost ${lost}, doubled ${doubled}, wrong id ${wrongId}, unanswered ${unanswered}, history violations ${violations.length}`);
      process.exitCode = lost + doubled + wrongId + unanswered + violations.length === 0 ? 0 : 1;
    } finally {
      await db.stop();
    }
  })();
}
