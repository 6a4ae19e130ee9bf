import { z } from 'zod';
import { DEVELOPMENT_ENVIRONMENTS } from './config.constants';
import { Env, envSchema } from './env.schema';

/**
 * The typed configuration: the environment's variables (env.schema.ts) given
 * the shape the code reads. This transform is the one place a variable meets
 * its place in that shape; `AppConfig` is its output type, so the shape is
 * written once.
 */
export const configSchema = envSchema.transform((e) => ({
  /** NODE_ENV, trimmed and lower-cased. */
  nodeEnv: e.NODE_ENV,
  /** Every NODE_ENV but `development` and `test` (production, prod, staging, a typo): turns on the refusals of production.ts. */
  production: !DEVELOPMENT_ENVIRONMENTS.includes(e.NODE_ENV),
  port: e.PORT,
  database: database(e),
  /** The idempotency module's Redis store; without it, POST /orders/{id}/confirmation is not mounted. */
  redis: { url: e.REDIS_URL },
  apiKeys: e.API_KEYS,
  bodyLimitBytes: e.BODY_LIMIT,
  logLevel: e.LOG_LEVEL,
  corsOrigins: e.CORS_ORIGINS,
  idempotency: idempotency(e),
  cardNetwork: cardNetwork(e),
  recovery: { enabled: e.RECOVERY_ENABLED, intervalMs: e.RECOVERY_INTERVAL },
  /** Admission control of the routes that reach the card network (0: unlimited). */
  payments: { concurrency: e.PAYMENTS_CONCURRENCY, queueLimit: e.PAYMENTS_QUEUE_LIMIT, perClient: e.PAYMENTS_CONCURRENCY_PER_CLIENT },
  http: {
    /** Receiving a whole request (headers and body) may take this long; then 408. */
    requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT,
    /** An idle keep-alive connection is closed after this (longer than a load balancer's idle timeout). */
    keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT,
    /** Proxies (addresses or CIDRs) whose X-Forwarded-For is believed; empty: none. */
    trustProxy: e.TRUST_PROXY,
  },
  /**
   * Who may read /metrics: with a token, only `Authorization: Bearer <token>`;
   * with a port, it is served there (on `host`) and not on the API port; with
   * neither, it is not served at all.
   */
  metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT, host: e.METRICS_HOST },
  /** Per instance (see docs/security.md): requests per second per client; failed authentications per minute per address. */
  rateLimit: { perClientPerSecond: e.RATE_LIMIT_PER_CLIENT, unauthenticatedPerMinute: e.RATE_LIMIT_UNAUTHENTICATED },
  /** Order confirmations one order may be sent in 24 hours, and one client in an hour (counted in Redis: every instance agrees). */
  confirmations: { perOrderPerDay: e.CONFIRMATIONS_PER_ORDER_PER_DAY, perClientPerHour: e.CONFIRMATIONS_PER_CLIENT_PER_HOUR },
}));

/** The configuration every module reads (injected as APP_CONFIG). */
export type AppConfig = z.output<typeof configSchema>;

function database(e: Env) {
  return {
    url: e.DATABASE_URL,
    embeddedDir: e.EMBEDDED_PG_DIR,
    embeddedPort: e.EMBEDDED_PG_PORT,
    poolSize: e.DATABASE_POOL_SIZE,
    /** Read replicas of `url`: the listings read from them; keys never do. Empty: none. */
    replicaUrls: e.DATABASE_REPLICA_URLS,
    /** Named (prepared) statements as the operator set them; undefined: the database mode decides. */
    preparedStatements: e.DATABASE_PREPARED_STATEMENTS,
    /** The primary without the pooler that `url` goes through: LISTEN and the migrations. */
    directUrl: e.DATABASE_DIRECT_URL,
  };
}

function idempotency(e: Env) {
  return {
    leaseMs: e.IDEMPOTENCY_LEASE,
    retentionMs: e.IDEMPOTENCY_RETENTION,
    claimPoolSize: e.IDEMPOTENCY_CLAIM_POOL_SIZE,
    /** How non-phased routes that do not say commit their key (`one`: inside the handler's transaction). */
    commit: e.IDEMPOTENCY_COMMIT,
    purge: {
      enabled: e.IDEMPOTENCY_PURGE_ENABLED,
      cron: e.IDEMPOTENCY_PURGE_CRON,
      batchSize: e.IDEMPOTENCY_PURGE_BATCH,
      budgetMs: e.IDEMPOTENCY_PURGE_BUDGET,
    },
    /** Memory for completed responses served to replays without the database (0: off). */
    replayCacheBytes: e.IDEMPOTENCY_REPLAY_CACHE,
    /** `id:base64` keys sealing stored responses, newest first (empty: stored as sent). */
    encryptionKeys: e.IDEMPOTENCY_ENCRYPTION_KEYS,
  };
}

function cardNetwork(e: Env) {
  return {
    /** Stripe's API base; undefined: the bundled simulator runs inside the app. */
    url: e.CARD_NETWORK_URL?.replace(/\/$/, ''),
    apiKey: e.STRIPE_API_KEY.trim(),
    /** Latency of the embedded simulator. */
    delayMs: e.CARD_NETWORK_DELAY,
    timeoutMs: e.CARD_NETWORK_TIMEOUT,
    maxRetries: e.CARD_NETWORK_MAX_RETRIES,
    /** Verify the network's webhooks (Stripe-Signature): an event signed with any of them. The first signs the embedded simulator's. */
    webhookSecrets: e.STRIPE_WEBHOOK_SECRET,
    /** How long a processed webhook event id is kept (longer than the network retries). */
    webhookEventRetentionMs: e.WEBHOOK_EVENT_RETENTION,
  };
}
