import { DynamicModule, ForwardReference, INestApplication, Provider, Type } from '@nestjs/common';
import { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type { RouteOptions } from 'fastify';
import { DataSource } from 'typeorm';
import { AppModule } from '../../src/app.module';
import { configureApp, createHttpAdapter } from '../../src/app.setup';
import { AppConfig, loadConfig } from '../../src/config/config';
import { ConfigChange } from './config';
import { TestDatabase, createTestDatabase } from './database';

export { failedAuthLimit } from './config';
export { countRows } from '../../packages/idempotency/test/support/test-services';

export const CLIENT_A = { name: 'client-a', key: 'sk_test_client_a_0123456789abcdef' };
export const CLIENT_B = { name: 'client-b', key: 'sk_test_client_b_0123456789abcdef' };
/** METRICS_TOKEN of every test app: /metrics is served on the API port with it. */
export const METRICS_TOKEN = 'metrics_test_token_0123456789abcdef';
export const metricsAuth = () => ({ Authorization: `Bearer ${METRICS_TOKEN}` });

export interface TestAppOptions {
  /** Environment overrides (strings, as in production). */
  env?: Record<string, string>;
  /**
   * Changes to the configuration the environment gave, for what no variable
   * sets (the fixed limits of config.schema.ts), e.g. a queue of 2 instead of 1000.
   */
  config?: ConfigChange;
  /** Extra modules of the test app (demo routes live in test/, never in src/). */
  imports?: (Type | DynamicModule | ForwardReference)[];
  /** Providers to replace, e.g. the idempotency store with a naive one. */
  overrides?: { provide: unknown; useValue?: unknown; useClass?: Type; useFactory?: (...args: never[]) => unknown; inject?: never[] }[];
  /** Reuse an existing database (e.g. a second instance); a fresh one otherwise. */
  database?: TestDatabase;
  /** Listen on a real port (separate sockets for race tests). */
  listen?: boolean;
  /** Sees every route the app registers (Fastify's onRoute), the app's own hooks after it. */
  onRoute?: (route: RouteOptions) => void;
}

export interface TestApp {
  app: INestApplication;
  config: AppConfig;
  db: TestDatabase;
  dataSource: DataSource;
  /** Base URL when listening. */
  url?: string;
  auth(client?: { key: string }): { Authorization: string };
  close(): Promise<void>;
}

export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const db = options.database ?? (await createTestDatabase());
  const loaded = loadConfig({
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    API_KEYS: `${CLIENT_A.name}:${CLIENT_A.key},${CLIENT_B.name}:${CLIENT_B.key}`,
    CARD_NETWORK_DELAY: '0ms',
    METRICS_TOKEN,
    // The suites send hundreds of requests at once from one client: no throttling unless a
    // suite asks for it (the production default is 100/s).
    RATE_LIMIT_PER_CLIENT: '1000000',
    ...options.env,
  });
  const config = (options.config ?? ((c) => c))(quietDefaults(loaded, options.env ?? {}));
  let builder = Test.createTestingModule({
    imports: [AppModule.register({ config, databaseUrl: db.url }), ...(options.imports ?? [])],
  });
  for (const o of options.overrides ?? []) {
    const b = builder.overrideProvider(o.provide);
    if (o.useValue !== undefined) builder = b.useValue(o.useValue);
    else if (o.useClass) builder = b.useClass(o.useClass);
    else if (o.useFactory) builder = b.useFactory({ factory: o.useFactory, inject: o.inject });
  }
  const moduleRef = await builder.compile();
  const app = moduleRef.createNestApplication<NestFastifyApplication>(createHttpAdapter(config), { bodyParser: false, bufferLogs: true });
  if (options.onRoute) app.getHttpAdapter().getInstance().addHook('onRoute', options.onRoute);
  configureApp(app, config);
  let url: string | undefined;
  try {
    if (options.listen) {
      await app.listen(0, '127.0.0.1');
      url = await app.getUrl();
      url = url.replace('[::1]', '127.0.0.1');
    } else {
      await app.init();
      // Supertest sends to the Node server: Fastify must have loaded its plugins and routes first.
      await app.getHttpAdapter().getInstance().ready();
    }
  } catch (error) {
    // A startup refused (what some suites assert): close what did start (pools, Redis), then report.
    await app.close().catch(() => undefined);
    if (!options.database) await db.drop().catch(() => undefined);
    throw error;
  }
  const dataSource = app.get(DataSource);
  return {
    app,
    config,
    db,
    dataSource,
    url,
    auth: (client = CLIENT_A) => ({ Authorization: `Bearer ${client.key}` }),
    close: async () => {
      await app.close();
      if (!options.database) await db.drop();
    },
  };
}

/**
 * What every suite runs with unless it asks otherwise: no purge job (its runs
 * would delete what a suite wrote; IDEMPOTENCY_JOBS=on asks for it), and no
 * failed-authentication limit (hundreds of requests at once from one address;
 * a suite that tests the limit sets it with `config`).
 */
function quietDefaults(config: AppConfig, env: Record<string, string>): AppConfig {
  const purge = env.IDEMPOTENCY_JOBS === undefined ? { ...config.idempotency.purge, enabled: false } : config.idempotency.purge;
  return {
    ...config,
    idempotency: { ...config.idempotency, purge },
    rateLimit: { ...config.rateLimit, unauthenticatedPerMinute: 1_000_000 },
  };
}


export type { Provider };
