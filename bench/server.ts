import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Pool } from 'pg';
import { AppModule } from '../src/app.module';
import { configureApp, createHttpAdapter } from '../src/app.setup';
import { BenchModule } from './bench.module';
import { benchConfig } from './lib/app';
import { DataSource } from 'typeorm';
import { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';
import { PoolMeter } from './lib/pool-meter';
import { SqlCounter } from './lib/sql-counter';

/**
 * The bench's HTTP server, a child process of run.js (so autocannon and the
 * server do not share one event loop): AppModule as main.ts builds it, plus
 * BenchModule's unprotected route, configured by configureApp, on a free
 * loopback port that it reports to the parent over IPC. Stops on 'stop'.
 * With BENCH_COUNT_SQL=1 it counts the statements its connections send
 * (SqlCounter) and meters the app's pool (PoolMeter): 'sql-start' zeroes and
 * starts both, 'sql-stop' stops them and answers `{ sql: SqlCount, pool: PoolUse }`.
 */
async function main(): Promise<void> {
  const counter = process.env.BENCH_COUNT_SQL === '1' ? new SqlCounter() : undefined;
  counter?.install();
  const databaseUrl = process.env.BENCH_DATABASE_URL;
  if (!databaseUrl || !process.send) throw new Error('bench/server.js is started by bench/run.js');
  const config = benchConfig(databaseUrl, JSON.parse(process.env.BENCH_APP_ENV ?? '{}') as Record<string, string>);
  const root = AppModule.register({ config, databaseUrl });
  root.imports = [...(root.imports ?? []), BenchModule];
  const app = await NestFactory.create<NestFastifyApplication>(root, createHttpAdapter(config), { bodyParser: false, bufferLogs: true });
  configureApp(app, config);
  await app.listen(0, '127.0.0.1');
  // TypeORM's PostgreSQL driver keeps the app's pg Pool as `master` (the primary).
  const meter = counter ? new PoolMeter((app.get(DataSource).driver as PostgresDriver).master as Pool, config.database.poolSize) : undefined;
  const address = app.getHttpServer().address() as { port: number };
  process.on('message', (m) => {
    if (m === 'stop') void app.close().then(() => process.exit(0), () => process.exit(1));
    if (counter && m === 'sql-start') {
      counter.reset();
      counter.active = true;
      meter?.start();
    }
    if (counter && m === 'sql-stop') {
      counter.active = false;
      process.send!({ sql: counter.snapshot(), pool: meter?.stop() });
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ port: address.port });
}

main().catch((error: unknown) => {
  console.error('bench server failed:', error);
  process.exit(1);
});
