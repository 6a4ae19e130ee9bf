import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from '../src/app.module';
import { configureApp, createHttpAdapter } from '../src/app.setup';
import { BenchModule } from './bench.module';
import { benchConfig } from './lib/app';
import { SqlCounter } from './lib/sql-counter';

/**
 * The bench's HTTP server, a child process of run.js (so autocannon and the
 * server do not share one event loop): AppModule as main.ts builds it, plus
 * BenchModule's unprotected route, configured by configureApp, on a free
 * loopback port that it reports to the parent over IPC. Stops on 'stop'.
 * With BENCH_COUNT_SQL=1 it counts the statements its connections send
 * (SqlCounter): 'sql-start' zeroes and starts the count, 'sql-stop' stops it
 * and answers `{ sql: SqlCount }`.
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
  const address = app.getHttpServer().address() as { port: number };
  process.on('message', (m) => {
    if (m === 'stop') void app.close().then(() => process.exit(0), () => process.exit(1));
    if (counter && m === 'sql-start') {
      counter.reset();
      counter.active = true;
    }
    if (counter && m === 'sql-stop') {
      counter.active = false;
      process.send!({ sql: counter.snapshot() });
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send({ port: address.port });
}

main().catch((error: unknown) => {
  console.error('bench server failed:', error);
  process.exit(1);
});
