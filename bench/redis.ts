import 'reflect-metadata';
import { Controller, Module, Post } from '@nestjs/common';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import autocannon from 'autocannon';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { AppModule } from '../src/app.module';
import { configureApp, createHttpAdapter } from '../src/app.setup';
import { Idempotent } from 'safe-retries';
import { RedisIdempotencyStore } from 'safe-retries/redis';
import { ClaimRequest, IdempotencyStore, Ownership, StoredResponse } from 'safe-retries/testing';
import { BENCH_CLIENT, JSON_TYPE, PAYMENT_BODY, benchConfig, createStoreHarness } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { Percentiles, fmt, median, msSince, round, summarize, table } from './lib/stats';

/**
 * `npm run bench:redis`: the Redis store beside the PostgreSQL store, in one run
 * (figures in docs/benchmarks.md, "The Redis store").
 *
 *   store    one call at a time through each real store: a new key's claim, its
 *            completion (PostgreSQL: in its own transaction, as the interceptor
 *            runs it), a replay's claim; p50/p99
 *   http     req/s of two identical @Idempotent() routes, one per store, with
 *            fresh keys and with replays (replay cache off: every replay asks
 *            the store), alternating rounds, autocannon in this process
 *   memory   MEMORY USAGE of completed keys (the reference body of §4)
 *
 * Uses REDIS_URL when set, else starts its own redis-server (`--save ''
 * --appendonly no`), and PostgreSQL as `npm run bench` does.
 */
const env = (name: string, fallback: number) => (process.env[name]?.trim() ? Number(process.env[name]) : fallback);
const N = env('BENCH_STORE_N', 2000);
const HTTP_SECONDS = env('BENCH_DURATION', 5);
const HTTP_ROUNDS = env('BENCH_HTTP_ROUNDS', 2);
const MEMORY_KEYS = env('BENCH_REDIS_MEMORY_KEYS', 20_000);
const log = (m: string) => process.stderr.write(`[bench:redis] ${m}\n`);

@Controller('bench/store')
class StoreRoutesController {
  @Post('postgres')
  @Idempotent()
  postgres() {
    return { id: randomUUID(), amount: 1000, currency: 'usd' };
  }

  @Post('redis')
  @Idempotent({ store: 'redis' })
  redis() {
    return { id: randomUUID(), amount: 1000, currency: 'usd' };
  }
}

@Module({ controllers: [StoreRoutesController] })
class StoreRoutesModule {}

async function startRedis(): Promise<{ url: string; stop(): void }> {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, stop: () => undefined };
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const dir = mkdtempSync(join(tmpdir(), 'bench-redis-'));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const c = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    c.on('error', () => undefined); // not listening yet: connect() rejects, the loop tries again
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      break;
    } catch {
      c.disconnect();
      if (i > 100) throw new Error('redis-server did not start (is it installed? apt-get install redis-server)');
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    stop: () => {
      child.kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

type Complete = (owner: Ownership, response: StoredResponse) => Promise<void>;

async function storeLatency(store: IdempotencyStore, complete: Complete, request: (key: string) => ClaimRequest) {
  const response = () => ({ status: 201, body: JSON.stringify({ id: randomUUID(), amount: 1000, currency: 'usd' }), contentType: JSON_TYPE });
  const replayKey = randomUUID();
  const first = await store.claim(request(replayKey));
  if (first.kind !== 'claimed') throw new Error('setup: no claim');
  await complete(first.owner, response());
  for (let i = 0; i < Math.min(200, N); i++) {
    const c = await store.claim(request(randomUUID()));
    if (c.kind === 'claimed') await complete(c.owner, response());
    await store.claim(request(replayKey));
  }
  const claims: number[] = [];
  const completions: number[] = [];
  const replays: number[] = [];
  for (let i = 0; i < N; i++) {
    let t = process.hrtime.bigint();
    const c = await store.claim(request(randomUUID()));
    claims.push(msSince(t));
    if (c.kind !== 'claimed') throw new Error(`expected a claim, got ${c.kind}`);
    t = process.hrtime.bigint();
    await complete(c.owner, response());
    completions.push(msSince(t));
    t = process.hrtime.bigint();
    const r = await store.claim(request(replayKey));
    replays.push(msSince(t));
    if (r.kind !== 'completed') throw new Error(`expected a replay, got ${r.kind}`);
  }
  return { claim: summarize(claims), complete: summarize(completions), replay: summarize(replays) };
}

async function reqPerSec(port: number, path: string, replayKey: string | undefined): Promise<number> {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_CLIENT.key}` };
  const requests = replayKey
    ? [{ method: 'POST' as const, path, headers: { ...headers, 'idempotency-key': replayKey }, body: JSON.stringify(PAYMENT_BODY) }]
    : [
        {
          method: 'POST' as const,
          path,
          headers,
          body: JSON.stringify(PAYMENT_BODY),
          setupRequest: (r: object) => ({ ...r, headers: { ...headers, 'idempotency-key': randomUUID() } }),
        },
      ];
  const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections: 20, duration: HTTP_SECONDS, requests });
  const ok = r['2xx'];
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${path}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return round(ok / r.duration, 0);
}

async function main() {
  const db = await openBenchDatabase(log);
  const redisServer = await startRedis();
  const redisInfo = new Redis(redisServer.url);
  const version = ((await redisInfo.info('server')).match(/redis_version:(\S+)/) ?? [])[1];
  try {
    log(`PostgreSQL ${db.version.split(' ')[1]}, Redis ${version}`);
    // 1. Store latency, sequential, the same claim requests for both stores.
    const h = await createStoreHarness(db.url);
    const redisStore = await RedisIdempotencyStore.create({ url: redisServer.url, keyPrefix: 'bench:' });
    log(`store latency, ${N} sequential operations per path and store`);
    const pg = await storeLatency(h.store, h.complete, (k) => h.request(k));
    const rd = await storeLatency(redisStore, (o, r) => redisStore.complete(o, r), (k) => h.request(k));

    // 2. Bytes per completed key: MEMORY USAGE of each (the reference body).
    log(`MEMORY USAGE of ${MEMORY_KEYS} completed keys`);
    await redisInfo.flushdb();
    const names: string[] = [];
    let bodyBytes = 0;
    for (let i = 0; i < MEMORY_KEYS; i++) {
      const key = randomUUID();
      const request = h.request(key, { ...PAYMENT_BODY, amount: 100 + i });
      const c = await redisStore.claim(request);
      if (c.kind !== 'claimed') throw new Error('memory: no claim');
      const body = JSON.stringify({ id: randomUUID(), amount: 100 + i, currency: 'usd' });
      bodyBytes += body.length;
      await redisStore.complete(c.owner, { status: 201, body, contentType: JSON_TYPE });
      names.push(redisStore.redisKey(request));
    }
    const usage = await Promise.all(names.map((n) => redisInfo.memory('USAGE', n, 'SAMPLES', 0)));
    const usedMemory = Number(((await redisInfo.info('memory')).match(/used_memory:(\d+)/) ?? [])[1]);
    const dbsize = await redisInfo.dbsize();
    await redisStore.onModuleDestroy();
    await h.context.close();

    // 3. HTTP req/s: the two routes in one app, alternating rounds.
    log(`HTTP: ${HTTP_ROUNDS} alternating rounds of ${HTTP_SECONDS} s per route and scenario`);
    const config = benchConfig(db.url, { REDIS_URL: redisServer.url, IDEMPOTENCY_REPLAY_CACHE: '0', LOG_LEVEL: 'fatal' });
    // AppModule and the two routes, as the e2e suites build the app.
    const moduleRef = await Test.createTestingModule({ imports: [AppModule.register({ config, databaseUrl: db.url }), StoreRoutesModule] }).compile();
    const server = moduleRef.createNestApplication<NestFastifyApplication>(createHttpAdapter(config), { bodyParser: false, logger: ['error'] });
    configureApp(server, config);
    await server.listen(0, '127.0.0.1');
    const port = (server.getHttpServer().address() as AddressInfo).port;
    const replayKeys: Record<string, string> = {};
    for (const store of ['postgres', 'redis']) {
      replayKeys[store] = randomUUID();
      const res = await fetch(`http://127.0.0.1:${port}/bench/store/${store}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${BENCH_CLIENT.key}`, 'idempotency-key': replayKeys[store] },
        body: JSON.stringify(PAYMENT_BODY),
      });
      if (res.status !== 201) throw new Error(`setup ${store}: ${res.status}`);
    }
    const http: Record<string, number[]> = {};
    for (let round = 0; round < HTTP_ROUNDS; round++) {
      for (const store of round % 2 === 0 ? ['postgres', 'redis'] : ['redis', 'postgres']) {
        for (const scenario of ['fresh', 'replay'] as const) {
          const rps = await reqPerSec(port, `/bench/store/${store}`, scenario === 'replay' ? replayKeys[store] : undefined);
          (http[`${store} ${scenario}`] ??= []).push(rps);
        }
      }
    }
    await server.close();

    const row = (what: string, p: Percentiles, q: Percentiles) => [what, `${fmt(p.p50)} / ${fmt(p.p99)}`, `${fmt(q.p50)} / ${fmt(q.p99)}`, fmt(p.p50 / q.p50, 1)];
    const mean = (v: number[]) => round(v.reduce((a, b) => a + b, 0) / v.length, 0);
    const results = {
      versions: { postgres: db.version, redis: version },
      settings: { storeIterations: N, httpSeconds: HTTP_SECONDS, httpRounds: HTTP_ROUNDS, memoryKeys: MEMORY_KEYS },
      latencyMs: { postgres: pg, redis: rd },
      reqPerSec: Object.fromEntries(Object.entries(http).map(([k, v]) => [k, { mean: mean(v), rounds: v }])),
      memory: { keys: dbsize, medianBytesPerKey: median(usage.map(Number)), usedMemoryBytesPerKey: round(usedMemory / dbsize, 1), bodyBytes: round(bodyBytes / MEMORY_KEYS, 1) },
    };
    console.log(
      table(
        ['path (ms, p50 / p99)', 'PostgreSQL', 'Redis', 'PG/Redis p50'],
        [row('claim, new key', pg.claim, rd.claim), row('completion', pg.complete, rd.complete), row('replay (claim of a completed key)', pg.replay, rd.replay)],
      ),
    );
    console.log(
      table(
        ['req/s (20 connections)', 'PostgreSQL', 'Redis'],
        ['fresh', 'replay'].map((s) => [s, String(mean(http[`postgres ${s}`])), String(mean(http[`redis ${s}`]))]),
      ),
    );
    console.log(JSON.stringify(results, null, 2));
  } finally {
    redisInfo.disconnect();
    redisServer.stop();
    await db.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
