import { z } from 'zod';
import { IDEMPOTENCY_DEFAULTS, parseKeyRing } from 'safe-retries';
import { DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET } from './config.constants';
import { POSTGRES_URL, apiKeys, bytes, commaList, duration, integer, isAddressOrCidr, onOff, optionalMatching, optionalOnOff, optionalPort } from './env-values';

/**
 * Every environment variable the service reads: its kind, its default, and
 * what it does, written once. The reference (docs/configuration.md) and
 * .env.example are rendered from here (config.docs.ts). An issue's path is the
 * variable's name, so every message names it. config.schema.ts gives the
 * parsed variables their shape.
 */

/** Metadata of a variable: what it does, and an example value when it has no default. */
function documented<T extends z.ZodType>(schema: T, description: string, example?: string): T {
  return schema.meta({ ...schema.meta(), description, ...(example === undefined ? {} : { example }) });
}

const POSTGRES_URL_MESSAGE = 'expected a postgres:// or postgresql:// URL';

export const variables = z.object({
  NODE_ENV: documented(
    z.string().default('development').transform((v) => v.trim().toLowerCase()).meta({ default: 'development' }),
    '`development` or `test`. Any other value (`production`, `staging`, a typo) gets the production rules, which refuse the settings that are safe only on a laptop.',
  ),
  PORT: documented(integer(3000, 0, 65535), 'HTTP port.'),
  LOG_LEVEL: documented(
    z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').meta({ default: 'info' }),
    '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`. JSON lines on stdout; API keys and cookies are never logged.',
  ),
  API_KEYS: documented(
    apiKeys,
    'Clients upserted at boot: `name:secret` pairs, comma-separated, each secret at least 16 characters. For development, compose and tests; in production create clients with `npm run client:create -- <name>`.',
    'demo:sk_test_demo_0123456789abcdef',
  ),

  DATABASE_URL: documented(
    optionalMatching(POSTGRES_URL, POSTGRES_URL_MESSAGE),
    'External PostgreSQL (13 or newer). Unset: an embedded PostgreSQL 18 starts with the app, its data in `.data/postgres` under the working directory.',
    'postgres://app:app@localhost:5432/safe_retries',
  ),
  DATABASE_POOL_SIZE: documented(integer(20, 1, 1000), 'Connections of the main pool. The pool that commits idempotency claims gets half as many.'),
  DATABASE_REPLICA_URLS: documented(
    commaList().refine((urls) => urls.every((u) => POSTGRES_URL.test(u)), {
      // Never echo the URLs: they may carry passwords.
      message: 'expected a comma-separated list of postgres:// or postgresql:// URLs',
    }),
    "Read replicas of DATABASE_URL's server, comma-separated. Only the listings (`GET /payments`, `GET /orders`) read from them; idempotency keys, writes and every other read stay on the primary.",
    'postgres://app:app@replica-1:5432/safe_retries',
  ),
  DATABASE_DIRECT_URL: documented(
    optionalMatching(POSTGRES_URL, POSTGRES_URL_MESSAGE),
    'The primary itself when DATABASE_URL is a transaction pooler (PgBouncer): waiting duplicates and the outbox relay `LISTEN` and the migrations run there. Setting it tells the app that DATABASE_URL is a pooler.',
    'postgres://app:app@db-primary:5432/safe_retries',
  ),
  DATABASE_PREPARED_STATEMENTS: documented(
    optionalOnOff,
    'Named (prepared) statements. Unset: on for a direct connection, off behind a pooler declared by DATABASE_DIRECT_URL (PgBouncer before 1.21, or without `max_prepared_statements`, refuses them across clients). `on` behind a pooler only when it keeps prepared statements; `off` also tells the app that DATABASE_URL is a pooler.',
    'on',
  ),

  REDIS_URL: documented(
    optionalMatching(/^rediss?:\/\//, 'expected a redis:// or rediss:// URL'),
    'Redis (the primary, never a replica) for the caps of `POST /orders/{id}/confirmation` (3 per order a day, 1000 per client an hour, shared by every instance); the route is mounted only when this is set.',
    'redis://localhost:6379/0',
  ),

  IDEMPOTENCY_LEASE: documented(
    duration(IDEMPOTENCY_DEFAULTS.lease),
    'How long a claim is honoured before a retry may take an abandoned request over; a working request renews it every third of it. The recovery job looks for abandoned payments and refunds every two leases.',
  ),
  IDEMPOTENCY_RETENTION: documented(
    duration(IDEMPOTENCY_DEFAULTS.retention),
    "How long a key's response is kept, from the end of its operation (database clock); longer than the lease. An operation that has not ended is never forgotten. The purge runs 144 times a retention, at most every 10 minutes.",
  ),
  IDEMPOTENCY_REPLAY_CACHE: documented(
    bytes(`${IDEMPOTENCY_DEFAULTS.replayCache.maxBytes / 1024 / 1024}mb`, 0),
    'Memory per process for completed responses replayed without a database round trip (each within its retention, read again at least every minute). `0` turns it off.',
  ),
  IDEMPOTENCY_ENCRYPTION_KEYS: documented(
    // Never echoed.
    commaList().superRefine((entries, ctx) => {
      try {
        parseKeyRing(entries);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
      }
    }),
    "Stored responses and webhook endpoints' signing secrets sealed with AES-256-GCM: `id:base64` keys (32 random bytes each: `openssl rand -base64 32`), comma-separated, newest first. Rotate by putting a new key first: each boot reseals the endpoints' secrets under it (`npm run webhook-secrets:reseal` without a restart), and a key that still seals one cannot be removed (the boot stops, naming it); remove the old key a retention later. Required in production; unset elsewhere: stored as sent.",
    'k1:<base64 of 32 random bytes>',
  ),
  IDEMPOTENCY_JOBS: documented(
    onOff(IDEMPOTENCY_DEFAULTS.purge.enabled && IDEMPOTENCY_DEFAULTS.recovery.enabled && IDEMPOTENCY_DEFAULTS.outbox.enabled),
    'Run the background jobs in this process: the purge of expired keys and webhook events, the recovery of abandoned payments and refunds, and the outbox relay that sends order confirmations and webhook deliveries. Every instance may run them: each is safe on many. `off`: the instance only serves requests, and what it queues is sent by the instances with the jobs on (at least one must run them).',
  ),

  CARD_NETWORK_URL: documented(
    optionalMatching(/^https?:\/\/[^/]+\/?$/, 'expected the API base, e.g. https://api.stripe.com or http://127.0.0.1:4242'),
    "The card network's API base: `https://api.stripe.com`, or a standalone simulator (`npm run card-network`). Unset: the bundled simulator runs inside the app. The simulator's fault tokens (`tok_chargeThen*`) work only while a simulator is the network.",
    'http://127.0.0.1:4242',
  ),
  CARD_NETWORK_SECRET: documented(
    z
      .string()
      .default(DEFAULT_CARD_NETWORK_SECRET)
      .refine((v) => /^sk_(test|live)_[A-Za-z0-9_]+$/.test(v.trim()), { message: 'expected a secret key sk_test_... or sk_live_...' })
      .transform((v) => v.trim())
      .meta({ default: DEFAULT_CARD_NETWORK_SECRET }),
    "The card network's secret key (`sk_test_...` or `sk_live_...`). The default is the simulator's published test key.",
  ),
  CARD_NETWORK_WEBHOOK_SECRET: documented(
    commaList(DEFAULT_WEBHOOK_SECRET).refine(
      (secrets) => secrets.length > 0 && secrets.every((s) => /^whsec_[A-Za-z0-9_]{8,}$/.test(s)),
      // Never echo the secrets.
      { message: 'expected webhook signing secrets whsec_..., separated by commas' },
    ),
    "Verifies the network's webhooks (`POST /webhooks/card-network`, `Stripe-Signature`): `whsec_...` secrets, comma-separated while one is rolled or several endpoints deliver here; any of them verifies an event. The bundled simulator signs with the first. The default is the simulator's published secret.",
  ),
  CARD_NETWORK_TIMEOUT: documented(duration('5s'), 'Time limit of one call to the card network; a timeout is an unknown outcome (503, resumed with the same key), never a decline.'),
  CARD_NETWORK_MAX_RETRIES: documented(integer(2, 0, 10), "The Stripe SDK's resends of one call (network errors, 409, 5xx), always with the same idempotency key."),
  CARD_NETWORK_DELAY: documented(duration('50ms', { zero: true }), 'Latency of the bundled simulator (development).'),

  PAYMENTS_CONCURRENCY: documented(
    integer(90, 0, 100_000),
    'Payments and refunds (they reach the card network) this instance works on at once, each from when its body has arrived; the next wait their turn. A client alone may take every slot; while other clients wait, a freed slot goes to the waiting client with the fewest at work, so a newcomer is served with the next slots that free and clients waiting together end with equal shares. Sized on 2 cores (docs/benchmarks.md §7); raise it with more. `0`: no limit.',
  ),

  HTTP_BODY_LIMIT: documented(bytes('100kb', 1), 'Largest request body (`b`, `kb`, `mb`); a larger one gets 413 `payload_too_large`.'),
  HTTP_CORS_ORIGINS: documented(commaList(), 'Browser origins allowed by CORS, comma-separated. Unset: CORS off.', 'https://shop.example'),
  HTTP_TRUST_PROXY: documented(
    commaList().refine((list) => list.every(isAddressOrCidr), {
      message: 'expected a comma-separated list of IP addresses or CIDR ranges (e.g. 10.0.0.0/8)',
    }),
    "Your load balancers and proxies (addresses or CIDRs, comma-separated), whose `X-Forwarded-For` gives the client's address. Unset: the header is ignored; a warning on the first request from a private address, when one address holds most connections (at most every 10 minutes), and at boot under the production rules.",
    '10.0.0.0/8',
  ),
  HTTP_KEEP_ALIVE_TIMEOUT: documented(
    duration('72s'),
    "An idle keep-alive connection is closed after this. Keep it longer than the idle timeout of the load balancer in front (AWS ALB: 60 s; Google Cloud's: 600 s).",
  ),

  METRICS_TOKEN: documented(
    // Never echo the token itself.
    optionalMatching(/^[\x21-\x7e]{16,512}$/, 'expected at least 16 printable characters without spaces'),
    '`/metrics` answers only `Authorization: Bearer <token>` (16 or more printable characters, compared in constant time).',
    '<16+ random characters>',
  ),
  METRICS_PORT: documented(
    optionalPort,
    'Serve `/metrics` on this port instead of the API port: on every address when METRICS_TOKEN is set, on 127.0.0.1 only when it is not. With neither METRICS_PORT nor METRICS_TOKEN, `/metrics` is not served.',
    '9464',
  ),

  RATE_LIMIT_PER_CLIENT: documented(integer(100, 1, 1_000_000_000), 'Requests a second per API client, per instance; past it 429 `rate_limited` with `Retry-After`.'),
});

/**
 * Variables the service no longer reads, each with what took its place. Set,
 * they stop the boot with that line: a deployment never runs on a setting it
 * believes is applied.
 */
export const RETIRED_VARIABLES: Readonly<Record<string, string>> = {
  EMBEDDED_PG_DIR: 'removed: the embedded PostgreSQL keeps its data in .data/postgres under the working directory; start the app from another folder for another one',
  EMBEDDED_PG_PORT: 'removed: the embedded PostgreSQL listens on a free port',
  BODY_LIMIT: 'renamed: set HTTP_BODY_LIMIT',
  CORS_ORIGINS: 'renamed: set HTTP_CORS_ORIGINS',
  TRUST_PROXY: 'renamed: set HTTP_TRUST_PROXY',
  HTTP_REQUEST_TIMEOUT: 'removed: a request must arrive whole within 30s',
  STRIPE_API_KEY: 'renamed: set CARD_NETWORK_SECRET',
  STRIPE_WEBHOOK_SECRET: 'renamed: set CARD_NETWORK_WEBHOOK_SECRET',
  WEBHOOK_EVENT_RETENTION: 'removed: a processed webhook event is remembered 7d',
  IDEMPOTENCY_PURGE_ENABLED: 'replaced: set IDEMPOTENCY_JOBS (on or off: the purge, the recovery job and the outbox relay together)',
  RECOVERY_ENABLED: 'replaced: set IDEMPOTENCY_JOBS (on or off: the purge, the recovery job and the outbox relay together)',
  RECOVERY_INTERVAL: 'removed: the recovery job runs every two IDEMPOTENCY_LEASE',
  IDEMPOTENCY_PURGE_CRON: 'removed: the purge runs 144 times an IDEMPOTENCY_RETENTION, at most every 10 minutes',
  IDEMPOTENCY_PURGE_BATCH: 'removed: the purge deletes 5000 keys a statement',
  IDEMPOTENCY_PURGE_BUDGET: 'removed: one purge run takes at most 60s',
  IDEMPOTENCY_CLAIM_POOL_SIZE: 'removed: the claim pool is half of DATABASE_POOL_SIZE',
  IDEMPOTENCY_COMMIT: "removed: a route's commit mode is chosen in its code (@Idempotent({ commit }))",
  PAYMENTS_QUEUE_LIMIT: 'removed: 1000 payments and refunds may wait their turn',
  PAYMENTS_CONCURRENCY_PER_CLIENT: 'removed: a client alone may use every PAYMENTS_CONCURRENCY slot; clients waiting together share them equally',
  METRICS_HOST: 'removed: METRICS_PORT listens on every address with METRICS_TOKEN, else on 127.0.0.1',
  RATE_LIMIT_UNAUTHENTICATED: 'removed: 60 failed authentications a minute per address',
  CONFIRMATIONS_PER_ORDER_PER_DAY: 'removed: 3 confirmations per order in 24 hours',
  CONFIRMATIONS_PER_CLIENT_PER_HOUR: 'removed: 1000 confirmations per client in an hour',
};

/** The environment's variables, each of its kind, checked against each other. */
export const envSchema = variables.superRefine((env, ctx) => {
  const problem = (name: keyof typeof env, message: string) => ctx.addIssue({ code: 'custom', path: [name], message });
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
});

/** The variables parsed: one property a variable, named as in the environment. */
export type Env = z.output<typeof envSchema>;
