import { z } from 'zod';
import { IDEMPOTENCY_COMMIT_MODES, IDEMPOTENCY_DEFAULTS, parseKeyRing } from 'safe-retries';
import { DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET } from './config.constants';
import {
  POSTGRES_URL,
  apiKeys,
  boolean,
  bytes,
  commaList,
  cron,
  duration,
  integer,
  isAddressOrCidr,
  optionalOnOff,
  optionalMatching,
  optionalPort,
} from './env-values';

/**
 * Every environment variable the service reads, with its kind and default, and
 * the rules between variables. An issue's path is the variable's name, so every
 * message names it. config.schema.ts gives the parsed variables their shape.
 */

/** Durations a zero would break (a lease, a timeout, an interval, a retention). */
const POSITIVE_DURATIONS = [
  'IDEMPOTENCY_LEASE',
  'CARD_NETWORK_TIMEOUT',
  'WEBHOOK_EVENT_RETENTION',
  'HTTP_REQUEST_TIMEOUT',
  'HTTP_KEEP_ALIVE_TIMEOUT',
  'RECOVERY_INTERVAL',
] as const;

const POSTGRES_URL_MESSAGE = 'expected a postgres:// or postgresql:// URL';

const variables = z.object({
  NODE_ENV: z.string().default('development').transform((v) => v.trim().toLowerCase()),
  PORT: integer(3000, 0, 65535),
  DATABASE_URL: optionalMatching(POSTGRES_URL, POSTGRES_URL_MESSAGE),
  // Read replicas of DATABASE_URL's server: only the listings read from them (docs/scale-out.md).
  DATABASE_REPLICA_URLS: commaList().refine((urls) => urls.every((u) => POSTGRES_URL.test(u)), {
    // Never echo the URLs: they may carry passwords.
    message: 'expected a comma-separated list of postgres:// or postgresql:// URLs',
  }),
  // Behind a transaction pooler (docs/scale-out.md): a direct URL for LISTEN and the
  // migrations. Named statements: unset, on directly and off behind a declared pooler.
  DATABASE_PREPARED_STATEMENTS: optionalOnOff,
  DATABASE_DIRECT_URL: optionalMatching(POSTGRES_URL, POSTGRES_URL_MESSAGE),
  // The Redis store of routes whose side effect is not in PostgreSQL (order confirmations).
  // Unset: those routes are not mounted.
  REDIS_URL: optionalMatching(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL'),
  EMBEDDED_PG_DIR: z.string().default('.data/postgres'),
  EMBEDDED_PG_PORT: optionalPort,
  DATABASE_POOL_SIZE: integer(20, 1, 1000),
  API_KEYS: apiKeys,
  BODY_LIMIT: bytes('100kb', 1),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  CORS_ORIGINS: commaList(),
  // The idempotency module's own defaults: one source.
  IDEMPOTENCY_LEASE: duration(IDEMPOTENCY_DEFAULTS.lease),
  IDEMPOTENCY_RETENTION: duration(IDEMPOTENCY_DEFAULTS.retention),
  IDEMPOTENCY_CLAIM_POOL_SIZE: integer(IDEMPOTENCY_DEFAULTS.claimPoolSize, 1, 1000),
  // How non-phased routes that do not say commit their key: durable (a claim of its own) or one.
  IDEMPOTENCY_COMMIT: z.enum(IDEMPOTENCY_COMMIT_MODES).default(IDEMPOTENCY_DEFAULTS.commit),
  IDEMPOTENCY_PURGE_ENABLED: boolean(IDEMPOTENCY_DEFAULTS.purge.enabled),
  IDEMPOTENCY_PURGE_CRON: cron(IDEMPOTENCY_DEFAULTS.purge.cron),
  IDEMPOTENCY_PURGE_BATCH: integer(IDEMPOTENCY_DEFAULTS.purge.batchSize, 1, 1_000_000),
  IDEMPOTENCY_PURGE_BUDGET: duration(IDEMPOTENCY_DEFAULTS.purge.budget),
  IDEMPOTENCY_REPLAY_CACHE: bytes(`${IDEMPOTENCY_DEFAULTS.replayCache.maxBytes / 1024 / 1024}mb`, 0),
  // Stored responses sealed with AES-256-GCM: `id:base64` keys, newest first. Never echoed.
  IDEMPOTENCY_ENCRYPTION_KEYS: commaList().superRefine((entries, ctx) => {
    try {
      parseKeyRing(entries);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
    }
  }),
  CARD_NETWORK_DELAY: duration('50ms'),
  CARD_NETWORK_URL: optionalMatching(/^https?:\/\/[^/]+\/?$/, 'expected the API base, e.g. https://api.stripe.com or http://127.0.0.1:4242'),
  STRIPE_API_KEY: z
    .string()
    .default(DEFAULT_CARD_NETWORK_SECRET)
    .refine((v) => /^sk_(test|live)_[A-Za-z0-9_]+$/.test(v.trim()), { message: 'expected a secret key sk_test_... or sk_live_...' }),
  CARD_NETWORK_TIMEOUT: duration('5s'),
  CARD_NETWORK_MAX_RETRIES: integer(2, 0, 10),
  // Several while a secret is rolled or several endpoints deliver here: an event verifies with any of them.
  STRIPE_WEBHOOK_SECRET: commaList(DEFAULT_WEBHOOK_SECRET).refine(
    (secrets) => secrets.length > 0 && secrets.every((s) => /^whsec_[A-Za-z0-9_]{8,}$/.test(s)),
    // Never echo the secrets.
    { message: 'expected webhook signing secrets whsec_..., separated by commas' },
  ),
  WEBHOOK_EVENT_RETENTION: duration('7d'),
  PAYMENTS_CONCURRENCY: integer(90, 0, 100_000),
  PAYMENTS_QUEUE_LIMIT: integer(1000, 0, 1_000_000),
  PAYMENTS_CONCURRENCY_PER_CLIENT: integer(30, 1, 100_000),
  HTTP_REQUEST_TIMEOUT: duration('30s'),
  HTTP_KEEP_ALIVE_TIMEOUT: duration('72s'),
  TRUST_PROXY: commaList().refine((list) => list.every(isAddressOrCidr), {
    message: 'expected a comma-separated list of IP addresses or CIDR ranges (e.g. 10.0.0.0/8)',
  }),
  RECOVERY_ENABLED: boolean(IDEMPOTENCY_DEFAULTS.recovery.enabled),
  RECOVERY_INTERVAL: duration(IDEMPOTENCY_DEFAULTS.recovery.interval),
  // Never echo the token itself.
  METRICS_TOKEN: optionalMatching(/^[\x21-\x7e]{16,512}$/, 'expected at least 16 printable characters without spaces'),
  METRICS_PORT: optionalPort,
  METRICS_HOST: z.string().default('127.0.0.1').transform((v) => v.trim()),
  RATE_LIMIT_PER_CLIENT: integer(100, 1, 1_000_000_000),
  RATE_LIMIT_UNAUTHENTICATED: integer(60, 1, 1_000_000_000),
  // Order confirmations sent (POST /orders/{id}/confirmation), counted in Redis across instances.
  CONFIRMATIONS_PER_ORDER_PER_DAY: integer(3, 1, 1_000),
  CONFIRMATIONS_PER_CLIENT_PER_HOUR: integer(1_000, 1, 1_000_000_000),
});

/** The environment's variables, each of its kind, checked against each other. */
export const envSchema = variables.superRefine((env, ctx) => {
  const problem = (name: keyof typeof env, message: string) => ctx.addIssue({ code: 'custom', path: [name], message });
  for (const name of POSITIVE_DURATIONS) {
    if (env[name] <= 0) problem(name, 'must be longer than 0');
  }
  // A replica of the embedded server cannot exist: replicas follow an external primary.
  if (env.DATABASE_REPLICA_URLS.length > 0 && env.DATABASE_URL === undefined) {
    problem('DATABASE_REPLICA_URLS', 'needs DATABASE_URL (the primary they replicate)');
  }
  if (env.DATABASE_DIRECT_URL !== undefined && env.DATABASE_URL === undefined) {
    problem('DATABASE_DIRECT_URL', 'needs DATABASE_URL (the pooler in front of that server)');
  }
  if (env.IDEMPOTENCY_LEASE >= env.IDEMPOTENCY_RETENTION) {
    problem('IDEMPOTENCY_LEASE', 'must be shorter than IDEMPOTENCY_RETENTION');
  }
  if (env.PAYMENTS_CONCURRENCY > 0 && env.PAYMENTS_CONCURRENCY_PER_CLIENT > env.PAYMENTS_CONCURRENCY) {
    problem('PAYMENTS_CONCURRENCY_PER_CLIENT', 'must not exceed PAYMENTS_CONCURRENCY');
  }
});

/** The variables parsed: one property a variable, named as in the environment. */
export type Env = z.output<typeof envSchema>;
