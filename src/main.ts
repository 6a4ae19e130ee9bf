import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import { NestFactory } from '@nestjs/core';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { configureApp, createHttpAdapter } from './app.setup';
import { AppModule } from './app.module';
import { ClientsService } from './auth/clients.service';
import { ConfigError, loadConfig } from './config/config';
import { UnsafeProductionConfigError, productionWarnings, refuseUnsafeProductionConfig } from './config/production';
import { DatabaseStartError, openDatabase } from './database/database-server';
import { CARD_NETWORK_ENDPOINT, CardNetworkEndpoint } from './payments/card-network/card-network.module';
import { WEBHOOK_PATH } from './payments/card-network-webhooks/card-network-webhooks.controller';

const SHUTDOWN_GRACE_MS = 10_000;

/** Boot: config, database (external or embedded), app; SIGTERM drains and exits 0. */
async function main(): Promise<void> {
  // A .env file (see .env.example) fills in what the environment does not set.
  if (existsSync('.env')) process.loadEnvFile('.env');
  const config = loadConfig();
  refuseUnsafeProductionConfig(config);
  for (const warning of productionWarnings(config)) console.log(JSON.stringify({ level: 40, context: 'Config', msg: warning }));
  const database = await openDatabase(config, (m) => console.log(JSON.stringify({ level: 30, context: 'Database', msg: m })));

  let app: NestFastifyApplication;
  try {
    app = await NestFactory.create<NestFastifyApplication>(AppModule.register({ config, databaseUrl: database.url }), createHttpAdapter(config), {
      bodyParser: false,
      bufferLogs: true,
    });
    configureApp(app, config);
    await app.listen(config.port, '0.0.0.0');
    await app.get(ClientsService).warnIfNoClients();
  } catch (error) {
    await database.stop();
    throw error;
  }

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    const force = setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS);
    force.unref();
    console.log(JSON.stringify({ level: 30, msg: `${signal}: draining requests and shutting down` }));
    try {
      await app.close();
    } finally {
      await database.stop();
    }
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  // The port bound (PORT=0 asks the OS for a free one; tests read it from this line).
  const { port } = app.getHttpServer().address() as AddressInfo;
  app.get<CardNetworkEndpoint>(CARD_NETWORK_ENDPOINT).deliverWebhooksTo(`http://127.0.0.1:${port}${WEBHOOK_PATH}`);
  console.log(JSON.stringify({ level: 30, msg: `listening on :${port}`, port, docs: `http://localhost:${port}/docs` }));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof UnsafeProductionConfigError || error instanceof DatabaseStartError) {
    console.error(error.message);
  } else {
    console.error('fatal: the service could not start:', error);
  }
  process.exit(1);
});
