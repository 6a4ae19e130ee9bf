import 'reflect-metadata';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { BoundaryResult, chargeBoundary } from './charge-boundary';
import { BenchServer, CannonRun, HttpRun, RaceResult, Scenario, cannon, completedKey, merge, race, startServer } from './http';
import { StoreHarness, createStoreHarness } from './lib/app';
import { BenchDatabase, openBenchDatabase } from './lib/database';
import { SqlCounter } from './lib/sql-counter';
import { fmt, round, table } from './lib/stats';
import { PileupResult, pileup } from './pileup';
import { FleetResult, fleetSoak } from './fleet';
import { PoolerResult, poolerBench } from './pooler';
import { PurgeBenchResult, purgeBench } from './purge';
import { PathCost, storeCost } from './store-cost';
import { StorageResult, storage } from './storage';
import { SlowNetworkResult, slowNetwork, slowNetworkReport } from './slownet';
import { OutboxBenchResult, outboxBench, outboxReport } from './outbox';
import { latencyChart } from './svg';

/**
 * `npm run bench`: the cost of exactly-once, measured in one run (results in docs/benchmarks.md).
 * Compiles with bench/tsconfig.json into dist-bench/ and runs from there.
 *
 *   §1 store cost per path (latency, SQL statements)   §4 storage per key
 *   §2 duplicate pile-up, ours vs the reference claim   §5 purge speed, claim p99 during it
 *   §3 HTTP throughput (autocannon), protected vs not   §6 100 identical concurrent requests
 *   §7 the charge boundary: phased vs pool-bound payments under a 300 ms card network
 *   §8 behind PgBouncer (transaction mode): new keys and payments, direct vs through it
 *   §9 a fleet of four behind one PgBouncer, instances killed and restarted under load, reconciled
 *   §10 payments under a slow network: 300 ms calls, 100 clients, a pool of 5; statements and commits per payment
 *   §12 events out: the outbox's relay, messages relayed per second and commit-to-delivery latency
 *
 * Prints the tables, writes bench/results.json (every figure) and bench/latency.svg.
 * Every comparison is a ratio of two figures from this same run.
 */
const env = (name: string, fallback: number) => {
  const v = process.env[name];
  return v === undefined || v.trim() === '' ? fallback : Number(v);
};
const SETTINGS = {
  storeIterations: env('BENCH_STORE_N', 2000),
  duplicates: 99,
  holdMs: env('BENCH_HOLD_MS', 50),
  pileupRounds: env('BENCH_PILEUP_ROUNDS', 9),
  pileupSampledRounds: env('BENCH_PILEUP_SAMPLED_ROUNDS', 3),
  httpConnections: 20,
  httpSeconds: env('BENCH_DURATION', 10),
  httpRounds: env('BENCH_HTTP_ROUNDS', 2),
  warmupSeconds: env('BENCH_WARMUP', 3),
  raceRequests: 100,
  raceRounds: env('BENCH_RACE_ROUNDS', 5),
  storageKeys: env('BENCH_STORAGE_KEYS', 100_000),
  storageConcurrency: 20,
  /** Informational: bytes per key when the stored body is a POST /payments response. */
  storagePaymentKeys: env('BENCH_STORAGE_PAYMENT_KEYS', 20_000),
  purgeKeys: env('BENCH_PURGE_KEYS', 200_000),
  purgeBaselineMs: env('BENCH_PURGE_BASELINE_MS', 1000),
  purgeRounds: env('BENCH_PURGE_ROUNDS', 3),
  boundaryClients: env('BENCH_BOUNDARY_CLIENTS', 200),
  boundarySeconds: env('BENCH_BOUNDARY_SECONDS', 15),
  boundaryDelay: '300ms',
  slownetSeconds: env('BENCH_SLOWNET_SECONDS', 15),
  slownetCountedPayments: env('BENCH_SLOWNET_COUNTED', 300),
  poolerSeconds: env('BENCH_POOLER_SECONDS', 8),
  poolerClients: env('BENCH_POOLER_CLIENTS', 100),
  poolerServerConnections: env('BENCH_POOLER_SERVER_CONNECTIONS', 8),
  fleetSeconds: env('BENCH_FLEET_SECONDS', 60),
  fleetClients: env('BENCH_FLEET_CLIENTS', 40),
  fleetKillEvery: env('BENCH_FLEET_KILL_EVERY', 6),
  outboxBurst: env('BENCH_OUTBOX_BURST', 5_000),
  outboxRate: env('BENCH_OUTBOX_RATE', 100),
  outboxSeconds: env('BENCH_OUTBOX_SECONDS', 10),
  outboxPaymentSeconds: env('BENCH_OUTBOX_PAYMENT_SECONDS', 8),
  outboxSlices: env('BENCH_OUTBOX_SLICES', 4),
  outboxFanOutOrders: env('BENCH_OUTBOX_FANOUT_ORDERS', 400),
};
const TARGETS = {
  statementsPerLookup: 1,
  pileupSpeedup: 4,
  oursLockWaiters: 0,
  protectedRatio: 0.8,
  replayRatio: 1.3,
  bytesPerKey: 250,
  totalSeconds: 480,
  /** §7: phased payments/s over pool-bound payments/s, the same two network calls each, in the same run. */
  boundarySpeedup: 4,
  boundaryHealthP99Ms: 100,
  boundaryListingP99Ms: 250,
  /** §10, the 100 clients as 100 API clients (as one API client they have the same slots: alone, a client takes them all). */
  slownetPaymentsPerSecond: 100,
  slownetHealthP99Ms: 200,
};
const CHART_LABELS: Record<Scenario, string> = {
  unprotected: 'POST /bench/payments (no key)',
  fresh: 'POST /payments, fresh key',
  replay: 'POST /payments, replay',
};
const OUT_DIR = resolve(__dirname, '../../bench');

const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

function machine() {
  let kernel: string;
  try {
    kernel = execFileSync('uname', ['-sr']).toString().trim();
  } catch {
    kernel = process.platform;
  }
  return { nproc: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown', memoryGiB: round(totalmem() / 2 ** 30, 1), node: process.version, kernel };
}

async function main(): Promise<void> {
  const started = process.hrtime.bigint();
  const loadAtStart = loadavg().map((x) => round(x, 2));
  const elapsed = () => round(Number(process.hrtime.bigint() - started) / 1e9, 1);
  const sections: Record<string, number> = {};
  const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    const t = elapsed();
    log(`${name}...`);
    const r = await fn();
    sections[name] = round(elapsed() - t, 1);
    log(`${name}: ${sections[name]} s`);
    return r;
  };

  let db: BenchDatabase | undefined;
  let h: StoreHarness | undefined;
  let server: BenchServer | undefined;
  const cleanup = async () => {
    await server?.stop().catch(() => undefined);
    await h?.context.close().catch(() => undefined);
    await db?.stop().catch(() => undefined);
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: cleaning up`);
      void cleanup().finally(() => process.exit(130));
    });
  }

  try {
    db = await timed('database', () => openBenchDatabase(log));
    const harness = (h = await timed('app context', () => createStoreHarness(db!.url)));

    const counter = new SqlCounter();
    counter.install();
    const store = await timed('§1 store cost', () => storeCost(harness, counter, SETTINGS.storeIterations));
    counter.uninstall();

    const pile = await timed('§2 pile-up', () =>
      pileup(harness, db!.url, { duplicates: SETTINGS.duplicates, holdMs: SETTINGS.holdMs, rounds: SETTINGS.pileupRounds, sampledRounds: SETTINGS.pileupSampledRounds }),
    );

    server = await timed('http server', () => startServer(db!.url));
    const port = server.port;
    const replayKey = await completedKey(port);
    const order: Scenario[] = ['unprotected', 'fresh', 'replay'];
    await timed('§3 warm-up', async () => {
      for (const s of order) await cannon(port, s, SETTINGS.warmupSeconds, SETTINGS.httpConnections, replayKey);
    });
    const http = {} as Record<Scenario, HttpRun>;
    await timed('§3 http', async () => {
      // Each route gets httpSeconds in httpRounds interleaved slices, so drift
      // (other load, table growth, checkpoints) falls on all three alike.
      const runs = { unprotected: [], fresh: [], replay: [] } as Record<Scenario, CannonRun[]>;
      const slice = SETTINGS.httpSeconds / SETTINGS.httpRounds;
      for (let i = 0; i < SETTINGS.httpRounds; i++) {
        for (const s of order) runs[s].push(await cannon(port, s, slice, SETTINGS.httpConnections, replayKey));
      }
      for (const s of order) http[s] = merge(s, runs[s]);
    });
    const raced: RaceResult = await timed('§6 race', () => race(port, SETTINGS.raceRequests, SETTINGS.raceRounds));
    await server.stop();
    server = undefined;
    const boundary: BoundaryResult = await timed('§7 charge boundary', () =>
      chargeBoundary(db!.url, { clients: SETTINGS.boundaryClients, seconds: SETTINGS.boundarySeconds, delay: SETTINGS.boundaryDelay }),
    );

    const slownet: SlowNetworkResult = await timed('§10 slow network', () =>
      slowNetwork(db!.url, { seconds: SETTINGS.slownetSeconds, countedPayments: SETTINGS.slownetCountedPayments }),
    );

    const pooler: PoolerResult = await timed('§8 PgBouncer', () =>
      poolerBench(db!.url, {
        seconds: SETTINGS.poolerSeconds,
        slices: 2,
        clients: SETTINGS.poolerClients,
        poolSize: SETTINGS.poolerServerConnections,
        log,
      }),
    );

    const fleet: FleetResult = await timed('§9 fleet soak', () =>
      fleetSoak(db!.url, {
        instances: 4,
        serverConnections: SETTINGS.poolerServerConnections,
        seconds: SETTINGS.fleetSeconds,
        clients: SETTINGS.fleetClients,
        killEvery: SETTINGS.fleetKillEvery,
        log,
      }),
    );
    const { lost, doubled, wrongId, unanswered } = fleet.reconciled;
    log(`§9 fleet soak: ${fleet.operations} payments at ${fleet.paymentsPerSecond}/s, ${fleet.kills} kills; lost ${lost}, doubled ${doubled}, wrong id ${wrongId}, unanswered ${unanswered}`);

    const outbox: OutboxBenchResult = await timed('§12 events out', () =>
      outboxBench(db!.url, {
        burst: SETTINGS.outboxBurst,
        rate: SETTINGS.outboxRate,
        seconds: SETTINGS.outboxSeconds,
        paymentSeconds: SETTINGS.outboxPaymentSeconds,
        slices: SETTINGS.outboxSlices,
        fanOutOrders: SETTINGS.outboxFanOutOrders,
        log,
      }),
    );

    const stored: StorageResult = await timed('§4 storage', () => storage(harness, SETTINGS.storageKeys, SETTINGS.storageConcurrency));
    const storedPayments: StorageResult = await timed('§4 storage, payment responses', () =>
      storage(harness, SETTINGS.storagePaymentKeys, SETTINGS.storageConcurrency, 'payment'),
    );
    const purged: PurgeBenchResult = await timed('§5 purge', () => purgeBench(harness, SETTINGS.purgeKeys, SETTINGS.purgeBaselineMs, SETTINGS.purgeRounds));

    await harness.context.close();
    h = undefined;
    await db.stop();
    const dbInfo = { kind: db.kind, version: db.version };
    db = undefined;

    const totalSeconds = elapsed();
    const ratios = {
      protectedOverUnprotected: round(http.fresh.reqPerSec / http.unprotected.reqPerSec, 2),
      replayOverUnprotected: round(http.replay.reqPerSec / http.unprotected.reqPerSec, 2),
      pileupSpeedup: pile.speedup,
      purgeClaimP99DuringOverWithout: purged.p99Ratio,
    };
    const lookups = store.filter((p) => p.expect !== 'claimed');
    const targets = [
      target('statements: replay, conflict, mismatch', lookups.map((p) => p.statements).join(', '), `= ${TARGETS.statementsPerLookup} each`, lookups.every((p) => p.statements === TARGETS.statementsPerLookup)),
      target('pile-up: reference time / ours', `${fmt(pile.speedup)}x`, `≥ ${TARGETS.pileupSpeedup}x`, pile.speedup >= TARGETS.pileupSpeedup),
      target('pile-up: max backends waiting on a lock (ours)', String(pile.ours.maxLockWaiters), `= ${TARGETS.oursLockWaiters}`, pile.ours.maxLockWaiters === TARGETS.oursLockWaiters),
      target('HTTP req/s: protected / unprotected', fmt(ratios.protectedOverUnprotected), `≥ ${TARGETS.protectedRatio}`, ratios.protectedOverUnprotected >= TARGETS.protectedRatio),
      target('HTTP req/s: replay / unprotected', fmt(ratios.replayOverUnprotected), `≥ ${TARGETS.replayRatio}`, ratios.replayOverUnprotected >= TARGETS.replayRatio),
      target('bytes per key, without VACUUM', fmt(stored.withoutVacuum.bytesPerKey, 1), `≤ ${TARGETS.bytesPerKey}`, stored.withoutVacuum.bytesPerKey <= TARGETS.bytesPerKey),
      target('bytes per key, after VACUUM', fmt(stored.afterVacuum.bytesPerKey, 1), `≤ ${TARGETS.bytesPerKey}`, stored.afterVacuum.bytesPerKey <= TARGETS.bytesPerKey),
      target('whole run', `${fmt(totalSeconds, 0)} s`, `< ${TARGETS.totalSeconds} s`, totalSeconds < TARGETS.totalSeconds),
      ...boundaryTargets(boundary),
      ...slownetTargets(slownet),
      target('fleet soak: payments lost, doubled, with a wrong id', `${lost}, ${doubled}, ${wrongId}`, '0, 0, 0', lost + doubled + wrongId === 0),
      target('fleet soak: history violations', String(fleet.history.violations.length), '0', fleet.history.violations.length === 0),
    ];

    // Load averages (1, 5, 15 min) at start and end: other work on the machine shows here.
    const m = { ...machine(), pgVersion: dbInfo.version, loadAverage: { start: loadAtStart, end: loadavg().map((x) => round(x, 2)) } };
    const results = {
      date: new Date().toISOString(),
      machine: m,
      database: dbInfo,
      settings: SETTINGS,
      targets: TARGETS,
      totalSeconds,
      sectionSeconds: sections,
      storeCost: store,
      pileup: pile,
      http: {
        connections: SETTINGS.httpConnections,
        seconds: SETTINGS.httpSeconds,
        rounds: SETTINGS.httpRounds,
        warmupSeconds: SETTINGS.warmupSeconds,
        order,
        server: 'child process (bench/server.js), autocannon in the bench process',
        runs: http,
      },
      race: raced,
      storage: stored,
      storagePayments: storedPayments,
      purge: purged,
      chargeBoundary: boundary,
      slowNetwork: slownet,
      pooler,
      fleet,
      outbox,
      ratios,
      targetsMet: targets,
    };
    mkdirSync(OUT_DIR, { recursive: true });
    writeFileSync(resolve(OUT_DIR, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(
      resolve(OUT_DIR, 'latency.svg'),
      latencyChart(
        'safe-retries: latency percentiles (ms)',
        `${results.date.slice(0, 16).replace('T', ' ')} UTC · ${m.nproc} cores ${m.cpu} · ${m.memoryGiB} GiB · Node ${m.node} · PostgreSQL ${dbInfo.version.split(' ')[1] ?? ''}`,
        [
          {
            title: '§1 Store, one request at a time',
            groups: store.map((p) => ({ label: p.path.replace(/ \(.*\)$/, ''), values: p.latencyMs })),
          },
          {
            title: `§3 HTTP, ${SETTINGS.httpConnections} connections, ${SETTINGS.httpSeconds} s each (autocannon)`,
            groups: order.map((s) => ({ label: CHART_LABELS[s], values: http[s].latencyMs })),
          },
          {
            title: `§5 Claim (new key), one at a time, ${SETTINGS.purgeKeys.toLocaleString('en-US')} expired keys`,
            groups: [
              { label: 'without purge', values: purged.claimWithoutPurge },
              { label: 'during purge', values: purged.claimDuringPurge },
            ],
          },
        ],
      ),
    );
    console.log(report(results, targets));
    log(`wrote bench/results.json and bench/latency.svg; whole run ${totalSeconds} s`);
  } catch (error) {
    await cleanup();
    throw error;
  }
}

interface Target {
  target: string;
  measured: string;
  goal: string;
  met: boolean;
}

function boundaryTargets(b: BoundaryResult): Target[] {
  const phased = b.runs.find((r) => r.design === 'phased')!;
  return [
    target('§7 phased / pool-bound payments/s (300 ms network)', `${fmt(b.speedup)}x`, `≥ ${TARGETS.boundarySpeedup}x`, b.speedup >= TARGETS.boundarySpeedup),
    target('§7 /health 200 on every probe', `${phased.health.ok}/${phased.health.probes}`, 'all', phased.health.ok === phased.health.probes),
    target('§7 /health p99 ms', fmt(phased.health.ms.p99, 1), `< ${TARGETS.boundaryHealthP99Ms}`, phased.health.ms.p99 < TARGETS.boundaryHealthP99Ms),
    target('§7 GET /payments?limit=1 p99 ms', fmt(phased.listing.ms.p99, 1), `< ${TARGETS.boundaryListingP99Ms}`, phased.listing.ms.p99 < TARGETS.boundaryListingP99Ms),
  ];
}

function slownetTargets(r: SlowNetworkResult): Target[] {
  const each = r.runs.find((x) => x.apiKeys > 1)!;
  return [
    target('§10 payments/s, 100 API clients (300 ms network, pool of 5)', fmt(each.paymentsPerSecond, 1), `≥ ${TARGETS.slownetPaymentsPerSecond}`, each.paymentsPerSecond >= TARGETS.slownetPaymentsPerSecond),
    target('§10 /health p99 ms, 100 API clients', fmt(each.health.ms.p99, 1), `< ${TARGETS.slownetHealthP99Ms}`, each.health.ms.p99 < TARGETS.slownetHealthP99Ms),
    target('§10 /health 200 on every probe', r.runs.map((x) => `${x.health.ok}/${x.health.probes}`).join(', '), 'all', r.runs.every((x) => x.health.ok === x.health.probes)),
  ];
}

function target(name: string, measured: string, goal: string, met: boolean): Target {
  return { target: name, measured, goal, met };
}

function report(
  r: {
    date: string;
    machine: ReturnType<typeof machine> & { pgVersion: string; loadAverage: { start: number[]; end: number[] } };
    totalSeconds: number;
    storeCost: PathCost[];
    pileup: PileupResult;
    http: { runs: Record<Scenario, HttpRun>; order: Scenario[]; seconds: number; rounds: number };
    race: RaceResult;
    storage: StorageResult;
    storagePayments: StorageResult;
    purge: PurgeBenchResult;
    chargeBoundary: BoundaryResult;
    slowNetwork: SlowNetworkResult;
    pooler: PoolerResult;
    outbox: OutboxBenchResult;
    ratios: Record<string, number>;
  },
  targets: Target[],
): string {
  const out: string[] = [];
  const m = r.machine;
  out.push(
    `safe-retries bench, ${r.date} · ${m.nproc} × ${m.cpu}, ${m.memoryGiB} GiB, Node ${m.node}, ${m.kernel}`,
    `${m.pgVersion}`,
    `load average at start ${m.loadAverage.start.join(' ')}, at end ${m.loadAverage.end.join(' ')}`,
    '',
  );

  out.push('§1 Store cost, one request at a time (ms; statements sent per operation)');
  out.push(
    table(
      ['path', 'p50', 'p90', 'p99', 'statements', 'which'],
      r.storeCost.map((p) => [
        p.path,
        fmt(p.latencyMs.p50, 3),
        fmt(p.latencyMs.p90, 3),
        fmt(p.latencyMs.p99, 3),
        p.statements,
        Object.entries(p.statementKinds).map(([k, v]) => (v === 1 ? k : `${v}× ${k}`)).join(' + '),
      ]),
    ),
    '',
  );

  const p = r.pileup;
  const answers = (a: Record<string, number | undefined>) =>
    Object.entries(a).map(([k, v]) => `${v} ${k}`).join(', ');
  out.push(
    `§2 Pile-up: ${p.duplicates} duplicates at once on a pool of ${p.poolSize}, owner busy ${p.holdMs} ms; ${p.rounds} timed rounds, then ${p.sampledRounds} rounds with the lock sampler`,
  );
  const v = (name: string, x: PileupResult['ours']) => [
    name,
    fmt(x.medianAllAnsweredMs),
    fmt(x.maxAllAnsweredMs),
    answers(x.answers),
    x.maxLockWaiters,
    x.maxUngrantedLocks,
    fmt(x.medianAllAnsweredSampledMs),
  ];
  out.push(
    table(
      ['claim', 'all answered, median ms', 'max ms', 'answers (timed rounds)', 'max backends waiting on a lock', 'max ungranted locks', 'median ms with sampler'],
      [
        v('ours (DO NOTHING, autocommit)', p.ours),
        v('reference (DO UPDATE in the tx)', p.reference),
        [
          `info: ours, owner completes ${p.oursOwnerCompletesMidBurst.holdMs} ms into the burst`,
          '',
          '',
          answers(p.oursOwnerCompletesMidBurst.answers),
          p.oursOwnerCompletesMidBurst.maxLockWaiters,
          p.oursOwnerCompletesMidBurst.maxUngrantedLocks,
          fmt(p.oursOwnerCompletesMidBurst.medianAllAnsweredMs),
        ],
      ],
    ),
    `speed-up (reference / ours): ${fmt(p.speedup)}x`,
    '',
  );

  out.push(
    `§3 HTTP throughput: 20 connections, ${r.http.seconds} s per route in ${r.http.rounds} interleaved slices (autocannon, CARD_NETWORK_DELAY=0, LOG_LEVEL=${process.env.BENCH_LOG_LEVEL ?? 'warn'})`,
  );
  out.push(
    table(
      ['route', 'req/s (per slice)', 'p50 ms', 'p90 ms', 'p99 ms', 'requests', 'status codes', 'errors'],
      r.http.order.map((s) => {
        const h = r.http.runs[s];
        return [h.route, `${fmt(h.reqPerSec, 0)} (${h.perRunReqPerSec.map((x) => fmt(x, 0)).join(' / ')})`, fmt(h.latencyMs.p50), fmt(h.latencyMs.p90), fmt(h.latencyMs.p99), h.requests, Object.entries(h.statusCodes).map(([k, v]) => `${k}: ${v}`).join(', '), h.errors];
      }),
    ),
    `protected / unprotected: ${fmt(r.ratios.protectedOverUnprotected)} · replay / unprotected: ${fmt(r.ratios.replayOverUnprotected)}`,
    '',
  );

  const s = r.storage;
  out.push(
    `§4 Storage: ${s.keys.toLocaleString('en-US')} completed keys through the store (concurrency ${s.concurrency}, ${fmt(s.keysPerSecond, 0)} keys/s; stored bodies ${fmt(s.bodyBytes, 0)} B)`,
  );
  out.push(
    table(
      ['state', 'bytes/key', 'total MiB', 'heap MiB', 'indexes MiB', 'dead tuples'],
      (
        [
          ['without VACUUM', s.withoutVacuum],
          ['after VACUUM', s.afterVacuum],
          ['after VACUUM FULL (info)', s.afterVacuumFull],
        ] as const
      ).map(([name, z]) => [name, fmt(z.bytesPerKey, 1), fmt(z.totalBytes / 2 ** 20), fmt(z.heapBytes / 2 ** 20), fmt(z.indexBytes / 2 ** 20), z.deadTuples]),
    ),
  );
  const sp = r.storagePayments;
  out.push(
    `info: with POST /payments responses as stored bodies (${fmt(sp.bodyBytes, 0)} B; ${sp.keys.toLocaleString('en-US')} keys): ` +
      `${fmt(sp.withoutVacuum.bytesPerKey, 1)} bytes/key without VACUUM, ${fmt(sp.afterVacuum.bytesPerKey, 1)} after`,
    '',
  );

  const g = r.purge;
  out.push(
    `§5 Purge of ${g.expiredKeys.toLocaleString('en-US')} expired keys by ${g.implementation}, ${g.rounds.length} rounds: ` +
      `median ${fmt(g.keysPerSecond, 0)} keys/s (${g.rounds.map((x) => `${x.deleted} in ${x.batches} batches of ${g.batchSize}, ${fmt(x.durationMs, 0)} ms`).join('; ')}; ${g.expiredLeft} expired left)`,
  );
  out.push(
    table(
      ['claim (new key), one at a time', 'n', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
      [
        ['without purge', g.claimWithoutPurge.n, fmt(g.claimWithoutPurge.p50, 3), fmt(g.claimWithoutPurge.p90, 3), fmt(g.claimWithoutPurge.p99, 3), fmt(g.claimWithoutPurge.max, 3)],
        ['during purge', g.claimDuringPurge.n, fmt(g.claimDuringPurge.p50, 3), fmt(g.claimDuringPurge.p90, 3), fmt(g.claimDuringPurge.p99, 3), fmt(g.claimDuringPurge.max, 3)],
      ],
    ),
    `claim p99 during / without purge: ${fmt(g.p99Ratio)}`,
    '',
  );

  const c = r.race;
  out.push(`§6 Race: ${c.concurrent} identical POST /payments at once, each on its own socket; ${c.rounds.length} rounds`);
  out.push(
    table(
      ['round', 'all answered ms', '201 created', '201 replayed', '409', 'other', 'distinct payment ids'],
      c.rounds.map((x, i) => [i + 1, fmt(x.allAnsweredMs), x.created, x.replays, x.conflicts409, Object.entries(x.other).map(([k, v]) => `${k}: ${v}`).join(', ') || '0', x.distinctPaymentIds]),
    ),
    `median time until all answered: ${fmt(c.medianAllAnsweredMs)} ms`,
    '',
  );

  const b = r.chargeBoundary;
  out.push(`§7 Charge boundary: CARD_NETWORK_DELAY=${b.delay}, ${b.clients} clients posting fresh payments, /health and GET /payments?limit=1 probed every 100 ms`);
  out.push(
    table(
      ['design', 'payments/s', 'payment p50', 'p99', 'errors', '/health 200', '/health p99', 'listing 200', 'listing p99'],
      b.runs.map((x) => [
        `${x.design} (${x.route})`,
        fmt(x.paymentsPerSecond, 0),
        fmt(x.paymentMs.p50, 0),
        fmt(x.paymentMs.p99, 0),
        Object.entries(x.errors).map(([k, v]) => `${k}: ${v}`).join(', ') || '0',
        `${x.health.ok}/${x.health.probes}`,
        fmt(x.health.ms.p99, 1),
        `${x.listing.ok}/${x.listing.probes}`,
        fmt(x.listing.ms.p99, 1),
      ]),
    ),
    `phased / pool-bound payments/s: ${fmt(b.speedup)}x`,
    `wait pile-up (@Idempotent({ wait: '2s' }), 100 identical payments at once, owner busy ${b.delay} at the network), per round: ` +
      b.waitPileup.rounds
        .map((x) => `${x.created} created + ${x.replays} replays + ${x.conflicts409} × 409 in ${fmt(x.allAnsweredMs, 0)} ms`)
        .join('; '),
    '',
  );

  out.push(...slowNetworkReport(r.slowNetwork), '');
  out.push(...outboxReport(r.outbox), '');

  const q = r.pooler;
  out.push(
    `§8 Behind PgBouncer ${q.pgbouncer} (transaction mode, ${q.poolSize} server connections): new keys (POST /orders, autocannon 20 connections) and ` +
      `payments (${q.paymentClients} clients, two 300 ms network calls each), ${q.secondsPerLoad} s each in ${q.slices} interleaved slices`,
  );
  const connections = (x: { serverConnections: number; clientConnections?: number }) =>
    x.clientConnections === undefined ? String(x.serverConnections) : `${x.serverConnections} (for ${x.clientConnections} clients)`;
  out.push(
    table(
      ['configuration', 'new keys req/s', 'p99 ms', 'server connections', 'payments/s', 'p99 ms', 'server connections', 'errors'],
      q.runs.map((x) => [
        x.config,
        fmt(x.newKeys.reqPerSec, 0),
        fmt(x.newKeys.ms.p99, 0),
        connections(x.newKeys),
        fmt(x.payments.perSecond, 1),
        fmt(x.payments.ms.p99, 0),
        connections(x.payments),
        `${x.newKeys.non2xx + x.newKeys.errors} / ${Object.values(x.payments.errors).reduce((a, b) => a + b, 0)}`,
      ]),
    ),
    '',
  );

  out.push(`Targets (whole run ${fmt(r.totalSeconds, 0)} s)`);
  out.push(table(['target', 'measured', 'goal', 'met'], targets.map((t) => [t.target, t.measured, t.goal, t.met ? 'yes' : 'NO'])));
  return out.join('\n');
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error('bench failed:', error);
    process.exit(1);
  },
);
