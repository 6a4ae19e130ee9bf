import { z } from 'zod';
import type { IdempotencyModuleOptions } from 'safe-retries';
import { DEVELOPMENT_ENVIRONMENTS } from './config.constants';
import { Env, envSchema } from './env.schema';

/**
 * The typed configuration: the environment's variables (env.schema.ts) given
 * the shape the code reads, with the values that follow from them and the
 * settings that are the same for every deployment (FIXED). This transform is
 * the one place a variable meets its place in that shape; `AppConfig` is its
 * output type, so the shape is written once.
 */

/** Settings whose value is right for every deployment: constants, not variables (docs/configuration.md). */
interface FixedSettings {
  readonly requestTimeoutMs: number;
  readonly paymentsQueueLimit: number;
  readonly unauthenticatedPerMinute: number;
  readonly confirmations: { readonly perOrderPerDay: number; readonly perClientPerHour: number };
  readonly embeddedDatabaseDir: string;
}

const FIXED: FixedSettings = {
  /** A request must arrive whole (headers and body) within this; then 408. */
  requestTimeoutMs: 30_000,
  /** Payments and refunds that may wait their turn on one instance; past it 503. */
  paymentsQueueLimit: 1_000,
  /** Failed authentications a minute per client address, per instance; past it 429. */
  unauthenticatedPerMinute: 60,
  /** Order confirmations one order may be sent in 24 hours, and one client in an hour. */
  confirmations: { perOrderPerDay: 3, perClientPerHour: 1_000 },
  /** The embedded PostgreSQL's data folder, under the working directory. */
  embeddedDatabaseDir: '.data/postgres',
};

export const configSchema = envSchema.transform((e) => ({
  /** NODE_ENV, trimmed and lower-cased. */
  nodeEnv: e.NODE_ENV,
  /** Every NODE_ENV but `development` and `test` (production, prod, staging, a typo): turns on the refusals of production.ts. */
  production: !DEVELOPMENT_ENVIRONMENTS.includes(e.NODE_ENV),
  port: e.PORT,
  logLevel: e.LOG_LEVEL,
  apiKeys: e.API_KEYS,
  database: {
    url: e.DATABASE_URL,
    embeddedDir: FIXED.embeddedDatabaseDir,
    poolSize: e.DATABASE_POOL_SIZE,
    /** Read replicas of `url`: the listings read from them; keys never do. Empty: none. */
    replicaUrls: e.DATABASE_REPLICA_URLS,
    /** Named (prepared) statements as the operator set them; undefined: the database mode decides. */
    preparedStatements: e.DATABASE_PREPARED_STATEMENTS,
    /** The primary without the pooler that `url` goes through: LISTEN and the migrations. */
    directUrl: e.DATABASE_DIRECT_URL,
  },
  /** The idempotency module's Redis store; without it, POST /orders/{id}/confirmation is not mounted. */
  redis: { url: e.REDIS_URL },
  idempotency: idempotency(e),
  cardNetwork: {
    /** Stripe's API base; undefined: the bundled simulator runs inside the app. */
    url: e.CARD_NETWORK_URL?.replace(/\/$/, ''),
    apiKey: e.CARD_NETWORK_SECRET,
    /** Latency of the embedded simulator. */
    delayMs: e.CARD_NETWORK_DELAY,
    timeoutMs: e.CARD_NETWORK_TIMEOUT,
    maxRetries: e.CARD_NETWORK_MAX_RETRIES,
    /** Verify the network's webhooks (Stripe-Signature): an event signed with any of them. The first signs the embedded simulator's. */
    webhookSecrets: e.CARD_NETWORK_WEBHOOK_SECRET,
  },
  /** Admission control of the routes that reach the card network (concurrency 0: unlimited). */
  payments: {
    concurrency: e.PAYMENTS_CONCURRENCY,
    queueLimit: FIXED.paymentsQueueLimit,
  },
  bodyLimitBytes: e.HTTP_BODY_LIMIT,
  corsOrigins: e.HTTP_CORS_ORIGINS,
  http: {
    /** Receiving a whole request (headers and body) may take this long; then 408. */
    requestTimeoutMs: FIXED.requestTimeoutMs,
    /** An idle keep-alive connection is closed after this (longer than a load balancer's idle timeout). */
    keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT,
    /** Proxies (addresses or CIDRs) whose X-Forwarded-For is believed; empty: none. */
    trustProxy: e.HTTP_TRUST_PROXY,
  },
  /**
   * Who may read /metrics: with a token, only `Authorization: Bearer <token>`;
   * with a port, it is served there and not on the API port: on every address
   * when a token guards it, else on loopback only; with neither, not at all.
   */
  metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT, host: e.METRICS_TOKEN ? '0.0.0.0' : '127.0.0.1' },
  /** Per instance (see docs/security.md): requests per second per client; failed authentications per minute per address. */
  rateLimit: { perClientPerSecond: e.RATE_LIMIT_PER_CLIENT, unauthenticatedPerMinute: FIXED.unauthenticatedPerMinute },
  /** Order confirmations one order may be sent in 24 hours, and one client in an hour (counted in Redis: every instance agrees). */
  confirmations: { perOrderPerDay: FIXED.confirmations.perOrderPerDay, perClientPerHour: FIXED.confirmations.perClientPerHour },
}));

/** The configuration every module reads (injected as APP_CONFIG). */
export type AppConfig = z.output<typeof configSchema>;

/**
 * The idempotency module's options, in its own names (app.module.ts passes them
 * as they are): what the variables set, and what follows from them. What no
 * variable sets is left to the module's defaults (IDEMPOTENCY_DEFAULTS).
 */
function idempotency(e: Env) {
  return {
    lease: e.IDEMPOTENCY_LEASE,
    retention: e.IDEMPOTENCY_RETENTION,
    postgres: {
      /** Claims and releases are one short statement each: half the main pool serves them. */
      claimPoolSize: Math.max(1, Math.ceil(e.DATABASE_POOL_SIZE / 2)),
      /** `id:base64` keys sealing stored responses, newest first (empty: stored as sent). */
      encryptionKeys: e.IDEMPOTENCY_ENCRYPTION_KEYS,
    },
    purge: { enabled: e.IDEMPOTENCY_JOBS, cron: purgeCron(e.IDEMPOTENCY_RETENTION) },
    /** The relay: an instance with the jobs off adds messages, and those with them on send them. */
    outbox: { enabled: e.IDEMPOTENCY_JOBS },
    replayCache: { maxBytes: e.IDEMPOTENCY_REPLAY_CACHE },
    /** An operation is abandoned once its lease has run out: looking every two leases finds it within three. */
    recovery: { enabled: e.IDEMPOTENCY_JOBS, interval: 2 * e.IDEMPOTENCY_LEASE },
  } satisfies IdempotencyModuleOptions;
}

const EVEN_SECONDS = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30];
const EVEN_MINUTES = [1, 2, 3, 4, 5, 6, 10];

/**
 * The purge's schedule: 144 runs a retention (every 10 minutes for 24 h), at
 * least every second and at most every 10 minutes, on a period that divides
 * the minute or the hour, so the runs are evenly spaced.
 */
export function purgeCron(retentionMs: number): string {
  const periodS = Math.floor(retentionMs / 144 / 1000);
  if (periodS < 60) {
    const s = EVEN_SECONDS.filter((n) => n <= Math.max(1, periodS)).at(-1)!;
    return s === 1 ? '* * * * * *' : `*/${s} * * * * *`;
  }
  const m = EVEN_MINUTES.filter((n) => n <= Math.floor(periodS / 60)).at(-1)!;
  return m === 1 ? '0 * * * * *' : `0 */${m} * * * *`;
}
