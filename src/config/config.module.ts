import { DynamicModule, Global, Module } from '@nestjs/common';
import type { AppConfig } from './config';

/** Injection token of the typed, validated configuration. */
export const APP_CONFIG = Symbol('APP_CONFIG');

/**
 * The configuration is parsed once, before the app is built, and handed in
 * here; modules inject `APP_CONFIG`, the one typed accessor.
 *
 * Why not `@nestjs/config`: its `ConfigModule.forRoot({ validate })` validates
 * while the module graph is being built, and the config is needed before that:
 * main.ts starts the embedded PostgreSQL and makes the Fastify adapter (body
 * limit, timeouts, trusted proxies) from it, and the CLI, the tests and the
 * bench boot the app from an environment of their own (`loadConfig(env)`), not
 * from `process.env` and .env files. What it would add is `ConfigService.get`,
 * keyed by strings and answering `T | undefined`, beside the typed object.
 * So the app does not depend on it.
 */
@Global()
@Module({})
export class AppConfigModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppConfigModule,
      providers: [{ provide: APP_CONFIG, useValue: config }],
      exports: [APP_CONFIG],
    };
  }
}
