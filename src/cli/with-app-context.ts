import 'reflect-metadata';
import { INestApplicationContext, LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from '../app.module';
import { AppConfig, ConfigError, loadConfig } from '../config/config';
import { UnsafeProductionConfigError } from '../config/production';
import { DatabaseStartError, openDatabase } from '../database/database-server';

/**
 * The app's modules for a command: no HTTP server, and (role 'cli') no metrics
 * listener, no purge or recovery job and no card network, so no embedded
 * simulator. Exported for the tests.
 */
export function createCommandContext(
  config: AppConfig,
  databaseUrl: string,
  logger: LoggerService | LogLevel[] = ['error', 'warn'],
): Promise<INestApplicationContext> {
  return NestFactory.createApplicationContext(AppModule.register({ config, databaseUrl, role: 'cli' }), { logger });
}

/**
 * Runs one command-line task against the app's database (DATABASE_URL, or the
 * embedded PostgreSQL) with the app's modules and no HTTP server, then exits:
 * 0 on success, 1 with one clear message on failure.
 */
export function runWithAppContext(name: string, task: (context: INestApplicationContext, config: AppConfig) => Promise<void>): void {
  const main = async () => {
    const config = loadConfig();
    // Beside a running app, its embedded PostgreSQL is used (and left running), never stopped.
    const database = await openDatabase(config, (m) => console.error(m), 'attach');
    let context: INestApplicationContext | undefined;
    try {
      context = await createCommandContext(config, database.url);
      await task(context, config);
    } finally {
      try {
        await context?.close();
      } finally {
        await database.stop();
      }
    }
  };
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      const known = error instanceof ConfigError || error instanceof UnsafeProductionConfigError || error instanceof DatabaseStartError;
      console.error(known ? (error as Error).message : `${name} failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
}
