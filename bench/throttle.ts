import 'reflect-metadata';
import { ChildProcess, fork } from 'node:child_process';
import { Controller, Get, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import autocannon from 'autocannon';
import { AppModule } from '../src/app.module';
import { configureApp, createHttpAdapter } from '../src/app.setup';
import { BenchModule } from './bench.module';
import { BENCH_CLIENT, PAYMENT_BODY, benchConfig } from './lib/app';
import { openBenchDatabase } from './lib/database';
import { median, round } from './lib/stats';

/**
 * The client throttle's cost at RATE_LIMIT_PER_CLIENT=10⁹ (benchConfig's): one
 * client, so every request of the last second is a hit of one key.
 *
 *   node dist-bench/bench/throttle.js <server.js> [<server.js> ...]
 *
 * Each argument is this file compiled from a tree to compare (its server role
 * runs AppModule, BenchModule and GET /bench/throttle, an authenticated route
 * that does nothing, so the guards are most of its cost). Every server is
 * started on one database; the runs alternate between them, route by route,
 * so the host's noise falls on all alike. THROTTLE_ROUNDS (default 5) runs of
 * THROTTLE_SECONDS (default 10), 20 connections, after a 5 s warm-up each;
 * THROTTLE_ROUTES (comma-separated keys of ROUTES) to run only some routes.
 */

@Controller('bench')
class ThrottleProbeController {
  @Get('throttle')
  probe(): { ok: true } {
    return { ok: true };
  }
}

@Module({ controllers: [ThrottleProbeController] })
class ThrottleProbeModule {}

async function serve(): Promise<void> {
  const databaseUrl = process.env.BENCH_DATABASE_URL!;
  const config = benchConfig(databaseUrl);
  const root = AppModule.register({ config, databaseUrl });
  root.imports = [...(root.imports ?? []), BenchModule, ThrottleProbeModule];
  const app = await NestFactory.create<NestFastifyApplication>(root, createHttpAdapter(config), { bodyParser: false, bufferLogs: true });
  configureApp(app, config);
  await app.listen(0, '127.0.0.1');
  process.on('message', (m) => {
    if (m === 'stop') void app.close().then(() => process.exit(0), () => process.exit(1));
  });
  process.on('disconnect', () => process.exit(0));
  process.send!({ port: (app.getHttpServer().address() as { port: number }).port });
}

interface Server {
  script: string;
  port: number;
  child: ChildProcess;
}

function start(script: string, databaseUrl: string): Promise<Server> {
  const child = fork(script, [], { env: { ...process.env, BENCH_DATABASE_URL: databaseUrl, THROTTLE_SERVER: '1' }, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m: { port: number }) => resolve({ script, port: m.port, child }));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

const ROUTES = {
  'GET /bench/throttle': { method: 'GET', path: '/bench/throttle' },
  'POST /bench/payments': { method: 'POST', path: '/bench/payments', body: JSON.stringify(PAYMENT_BODY) },
} as const;

async function run(port: number, route: keyof typeof ROUTES, seconds: number): Promise<{ rps: number; non2xx: number }> {
  const { path, ...request } = ROUTES[route];
  const r = await autocannon({
    url: `http://127.0.0.1:${port}${path}`,
    connections: 20,
    duration: seconds,
    headers: { authorization: `Bearer ${BENCH_CLIENT.key}`, 'content-type': 'application/json' },
    ...request,
  });
  return { rps: r.requests.total / r.duration, non2xx: r.non2xx };
}

async function main(): Promise<void> {
  const scripts = process.argv.slice(2);
  const rounds = Number(process.env.THROTTLE_ROUNDS ?? 5);
  const seconds = Number(process.env.THROTTLE_SECONDS ?? 10);
  const db = await openBenchDatabase((m) => console.error(m));
  const servers: Server[] = [];
  try {
    // One at a time: each migrates the database on boot.
    for (const script of scripts) servers.push(await start(script, db.url));
    const results: Record<string, Record<string, number[]>> = {};
    const routes = (process.env.THROTTLE_ROUTES?.split(',') ?? Object.keys(ROUTES)) as (keyof typeof ROUTES)[];
    for (const route of routes) {
      results[route] = {};
      for (const s of servers) {
        results[route][s.script] = [];
        await run(s.port, route, 5);
      }
      for (let i = 0; i < rounds; i++) {
        for (const s of i % 2 === 0 ? servers : [...servers].reverse()) {
          const r = await run(s.port, route, seconds);
          if (r.non2xx > 0) throw new Error(`${s.script} ${route}: ${r.non2xx} non-2xx answers`);
          results[route][s.script].push(round(r.rps, 0));
          console.error(`${route} ${s.script} round ${i + 1}: ${round(r.rps, 0)} req/s`);
        }
      }
    }
    const summary = Object.fromEntries(
      Object.entries(results).map(([route, byServer]) => {
        const medians = Object.fromEntries(Object.entries(byServer).map(([script, runs]) => [script, { runs, median: median(runs) }]));
        const [first, ...others] = Object.values(medians);
        return [route, { ...medians, ratios: others.map((o) => round(o.median / first.median, 3)) }];
      }),
    );
    console.log(JSON.stringify(summary, null, 2));
  } finally {
    for (const s of servers) {
      s.child.send('stop');
      await new Promise((resolve) => s.child.once('exit', resolve));
    }
    await db.stop();
  }
}

(process.env.THROTTLE_SERVER ? serve() : main()).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
