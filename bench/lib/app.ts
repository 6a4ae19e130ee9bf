import { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsService } from 'nestjs-cls';
import { DataSource } from 'typeorm';
import { AppModule } from '../../src/app.module';
import { AppConfig, loadConfig } from '../../src/config/config';
import { fingerprint } from '../../packages/idempotency/src/core/fingerprint';
import { keyId } from '../../packages/idempotency/src/contract/key-id';
// Through the installed package, as the app's own module is: its tokens and classes are the app's.
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from 'safe-retries/swagger';
import { IdempotencyStore, Ownership, StoredResponse, idempotencyStoreOf } from 'safe-retries/testing';

export const BENCH_CLIENT = { name: 'bench', key: 'sk_bench_0123456789abcdef0123456789' };
export const PAYMENT_BODY = { amount: 1000, currency: 'usd', source: 'tok_visa' };

/**
 * The app's configuration for the bench: defaults, except no purge schedule, no
 * card delay, quiet logs; `overrides` for a section that needs otherwise.
 */
export function benchConfig(databaseUrl: string, overrides: Record<string, string> = {}): AppConfig {
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    // BENCH_LOG_LEVEL (e.g. info) measures what request logging costs.
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    // BENCH_REPLAY_CACHE=0 measures replays read from the database (another instance's keys).
    ...(process.env.BENCH_REPLAY_CACHE === undefined ? {} : { IDEMPOTENCY_REPLAY_CACHE: process.env.BENCH_REPLAY_CACHE }),
    API_KEYS: `${BENCH_CLIENT.name}:${BENCH_CLIENT.key}`,
    CARD_NETWORK_DELAY: '0ms',
    // The bench measures the pipeline, not the throttle.
    RATE_LIMIT_PER_CLIENT: '1000000000',
    ...overrides,
  });
  const purge = { ...config.idempotency.purge, enabled: overrides.IDEMPOTENCY_JOBS !== undefined && config.idempotency.purge.enabled };
  return { ...config, idempotency: { ...config.idempotency, purge }, rateLimit: { ...config.rateLimit, unauthenticatedPerMinute: 1_000_000_000 } };
}

/** The real store, transaction host and data source, from a Nest application context of AppModule. */
export interface StoreHarness {
  context: INestApplicationContext;
  store: IdempotencyStore;
  txHost: TransactionHost<TransactionalAdapterTypeOrm>;
  cls: ClsService;
  dataSource: DataSource;
  options: ResolvedIdempotencyOptions;
  clientId: string;
  /** A claim request for `key`, with the fingerprint of POST /payments with `body`. */
  request(key: string, body?: unknown): Parameters<IdempotencyStore['claim']>[0];
  /** The fenced completion inside its own business transaction (as the interceptor runs it). */
  complete(owner: Ownership, response: StoredResponse): Promise<void>;
}

export async function createStoreHarness(databaseUrl: string): Promise<StoreHarness> {
  const config = benchConfig(databaseUrl);
  // A command-line context: the store and the purge, but no relay, recovery or card network, which
  // would take the bench server's messages and operations (another publisher, another simulator).
  const context = await NestFactory.createApplicationContext(AppModule.register({ config, databaseUrl, role: 'cli' }), {
    logger: ['error', 'warn'],
  });
  const dataSource = context.get(DataSource);
  const { store, inContext } = idempotencyStoreOf(context);
  const txHost = context.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
  const cls = context.get(ClsService);
  const options = context.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
  const [{ id: clientId }] = await dataSource.query<{ id: string }[]>('SELECT id FROM clients WHERE name = $1', [BENCH_CLIENT.name]);
  return {
    context,
    store,
    txHost,
    cls,
    dataSource,
    options,
    clientId,
    request: (key, body = PAYMENT_BODY) => ({
      scope: clientId,
      key,
      id: keyId(clientId, key),
      fingerprint: fingerprint('POST', '/payments', body),
      leaseMs: options.leaseMs,
      retentionMs: options.retentionMs,
    }),
    // As the interceptor runs it: in a transaction of its own, so the completion carries the COMMIT.
    complete: (owner, response) => inContext(() => store.runUnit(() => store.complete(owner, response))),
  };
}

export const JSON_TYPE = 'application/json; charset=utf-8';
