import { isIP } from 'node:net';
import { z } from 'zod';
import { IDEMPOTENCY_DEFAULTS, parseKeyRing } from 'safe-retries';
import { parseDuration } from './duration';

/**
 * Every environment variable the service reads, validated once at boot into a
 * typed `AppConfig`. Nothing outside src/config reads `process.env`. A bad value
 * stops the boot with a message that names the variable (see ConfigError).
 */

/** The documented test key of the bundled card network simulator (not a secret). */
export const DEFAULT_CARD_NETWORK_SECRET = 'sk_test_simulator_0123456789abcdef';
/** The documented webhook signing secret of the bundled simulator (not a secret). */
export const DEFAULT_WEBHOOK_SECRET = 'whsec_simulator_0123456789abcdef';

/** The NODE_ENV values that run without the production rules; any other value gets them (fail closed). */
export const DEVELOPMENT_ENVIRONMENTS: readonly string[] = ['development', 'test'];

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 * 1024 };

const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      try {
        return parseDuration(value);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
        return z.NEVER;
      }
    });

const integer = (fallback: number, min: number, max: number) =>
  z
    .string()
    .default(String(fallback))
    .refine((v) => /^\d+$/.test(v.trim()), { message: `expected an integer between ${min} and ${max}` })
    .transform((v) => Number(v))
    .refine((v) => v >= min && v <= max, { message: `expected an integer between ${min} and ${max}` });

const optionalPort = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()))
  .refine((v) => v === undefined || (/^\d+$/.test(v) && Number(v) >= 1 && Number(v) <= 65535), {
    message: 'expected a port between 1 and 65535',
  })
  .transform((v) => (v === undefined ? undefined : Number(v)));

/** A size in bytes (`512b`, `100kb`, `1mb`) of at least `min`. */
const bytes = (fallback: string, min: number) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const match = /^(\d+)\s*(b|kb|mb)?$/i.exec(value.trim());
      if (!match) {
        ctx.addIssue({ code: 'custom', message: `invalid size "${value}": expected e.g. 512b, 100kb or 1mb` });
        return z.NEVER;
      }
      const size = Number(match[1]) * SIZE_UNITS[(match[2] ?? 'b').toLowerCase()];
      if (size < min) {
        ctx.addIssue({ code: 'custom', message: `must be at least ${min} byte${min === 1 ? '' : 's'}` });
        return z.NEVER;
      }
      return size;
    });

const emptyToUndefined = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

export interface ApiKeySeed {
  name: string;
  secret: string;
}

const apiKeys = z
  .string()
  .default('')
  .transform((value, ctx): ApiKeySeed[] => {
    const seeds: ApiKeySeed[] = [];
    for (const entry of value.split(',').map((e) => e.trim()).filter(Boolean)) {
      const separator = entry.indexOf(':');
      const name = entry.slice(0, separator).trim();
      const secret = entry.slice(separator + 1).trim();
      if (separator <= 0 || !name || secret.length < 16) {
        // Never echo the secret itself into an error message.
        ctx.addIssue({
          code: 'custom',
          message: `expected name:secret pairs separated by commas, each secret at least 16 characters (entry ${seeds.length + 1})`,
        });
        return z.NEVER;
      }
      if (seeds.some((s) => s.name === name)) {
        ctx.addIssue({ code: 'custom', message: `the client name "${name}" appears twice` });
        return z.NEVER;
      }
      seeds.push({ name, secret });
    }
    return seeds;
  });

const cron = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .refine((v) => [5, 6].includes(v.trim().split(/\s+/).length), {
      message: 'expected a cron expression of 5 fields, or 6 with seconds first',
    });

const boolean = (fallback: boolean) =>
  z
    .string()
    .default(String(fallback))
    .refine((v) => ['true', 'false', '1', '0'].includes(v.trim().toLowerCase()), {
      message: 'expected true or false',
    })
    .transform((v) => ['true', '1'].includes(v.trim().toLowerCase()));

/** A switch: on/off, true/false or 1/0. */
const onOff = (fallback: boolean) =>
  z
    .string()
    .default(fallback ? 'on' : 'off')
    .refine((v) => ['on', 'off', 'true', 'false', '1', '0'].includes(v.trim().toLowerCase()), { message: 'expected on or off' })
    .transform((v) => ['on', 'true', '1'].includes(v.trim().toLowerCase()));

/** Durations a zero would break (a lease, a timeout, an interval, a retention). */
const POSITIVE_DURATIONS = [
  'IDEMPOTENCY_LEASE',
  'CARD_NETWORK_TIMEOUT',
  'WEBHOOK_EVENT_RETENTION',
  'HTTP_REQUEST_TIMEOUT',
  'HTTP_KEEP_ALIVE_TIMEOUT',
  'RECOVERY_INTERVAL',
] as const;

const schema = z
  .object({
    NODE_ENV: z.string().default('development').transform((v) => v.trim().toLowerCase()),
    PORT: integer(3000, 0, 65535),
    DATABASE_URL: emptyToUndefined.refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), {
      message: 'expected a postgres:// or postgresql:// URL',
    }),
    // Read replicas of DATABASE_URL's server: only the listings read from them (docs/scale-out.md).
    DATABASE_REPLICA_URLS: z
      .string()
      .default('')
      .transform((v) => v.split(',').map((u) => u.trim()).filter(Boolean))
      .refine((urls) => urls.every((u) => /^postgres(ql)?:\/\//.test(u)), {
        // Never echo the URLs: they may carry passwords.
        message: 'expected a comma-separated list of postgres:// or postgresql:// URLs',
      }),
    // Behind a transaction pooler (docs/scale-out.md): named statements off for a pooler
    // that does not keep them, and a direct URL for LISTEN and the migrations.
    DATABASE_PREPARED_STATEMENTS: onOff(true),
    DATABASE_DIRECT_URL: emptyToUndefined.refine((v) => v === undefined || /^postgres(ql)?:\/\//.test(v), {
      message: 'expected a postgres:// or postgresql:// URL',
    }),
    // The Redis store of routes whose side effect is not in PostgreSQL (order confirmations).
    // Unset: those routes are not mounted.
    REDIS_URL: emptyToUndefined.refine((v) => v === undefined || /^rediss?:\/\//.test(v), {
      message: 'expected a redis:// or rediss:// URL',
    }),
    EMBEDDED_PG_DIR: z.string().default('.data/postgres'),
    EMBEDDED_PG_PORT: optionalPort,
    DATABASE_POOL_SIZE: integer(20, 1, 1000),
    API_KEYS: apiKeys,
    BODY_LIMIT: bytes('100kb', 1),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    CORS_ORIGINS: z
      .string()
      .default('')
      .transform((v) => v.split(',').map((o) => o.trim()).filter(Boolean)),
    // The idempotency module's own defaults: one source.
    IDEMPOTENCY_LEASE: duration(IDEMPOTENCY_DEFAULTS.lease),
    IDEMPOTENCY_RETENTION: duration(IDEMPOTENCY_DEFAULTS.retention),
    IDEMPOTENCY_CLAIM_POOL_SIZE: integer(IDEMPOTENCY_DEFAULTS.claimPoolSize, 1, 1000),
    IDEMPOTENCY_PURGE_ENABLED: boolean(IDEMPOTENCY_DEFAULTS.purge.enabled),
    IDEMPOTENCY_PURGE_CRON: cron(IDEMPOTENCY_DEFAULTS.purge.cron),
    IDEMPOTENCY_PURGE_BATCH: integer(IDEMPOTENCY_DEFAULTS.purge.batchSize, 1, 1_000_000),
    IDEMPOTENCY_PURGE_BUDGET: duration(IDEMPOTENCY_DEFAULTS.purge.budget),
    IDEMPOTENCY_REPLAY_CACHE: bytes(`${IDEMPOTENCY_DEFAULTS.replayCache.maxBytes / 1024 / 1024}mb`, 0),
    // Stored responses sealed with AES-256-GCM: `id:base64` keys, newest first. Never echoed.
    IDEMPOTENCY_ENCRYPTION_KEYS: z
      .string()
      .default('')
      .transform((v) => v.split(',').map((k) => k.trim()).filter(Boolean))
      .superRefine((entries, ctx) => {
        try {
          parseKeyRing(entries);
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: (error as Error).message });
        }
      }),
    CARD_NETWORK_DELAY: duration('50ms'),
    CARD_NETWORK_URL: emptyToUndefined.refine((v) => v === undefined || /^https?:\/\/[^/]+\/?$/.test(v), {
      message: 'expected the API base, e.g. https://api.stripe.com or http://127.0.0.1:4242',
    }),
    STRIPE_API_KEY: z
      .string()
      .default(DEFAULT_CARD_NETWORK_SECRET)
      .refine((v) => /^sk_(test|live)_[A-Za-z0-9_]+$/.test(v.trim()), { message: 'expected a secret key sk_test_... or sk_live_...' }),
    CARD_NETWORK_TIMEOUT: duration('5s'),
    CARD_NETWORK_MAX_RETRIES: integer(2, 0, 10),
    // Several while a secret is rolled or several endpoints deliver here: an event verifies with any of them.
    STRIPE_WEBHOOK_SECRET: z
      .string()
      .default(DEFAULT_WEBHOOK_SECRET)
      .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
      .refine((secrets) => secrets.length > 0 && secrets.every((s) => /^whsec_[A-Za-z0-9_]{8,}$/.test(s)), {
        // Never echo the secrets.
        message: 'expected webhook signing secrets whsec_..., separated by commas',
      }),
    WEBHOOK_EVENT_RETENTION: duration('7d'),
    PAYMENTS_CONCURRENCY: integer(90, 0, 100_000),
    PAYMENTS_QUEUE_LIMIT: integer(1000, 0, 1_000_000),
    PAYMENTS_CONCURRENCY_PER_CLIENT: integer(30, 1, 100_000),
    HTTP_REQUEST_TIMEOUT: duration('30s'),
    HTTP_KEEP_ALIVE_TIMEOUT: duration('72s'),
    TRUST_PROXY: z
      .string()
      .default('')
      .transform((v) => v.split(',').map((a) => a.trim()).filter(Boolean))
      .refine((list) => list.every(isAddressOrCidr), { message: 'expected a comma-separated list of IP addresses or CIDR ranges (e.g. 10.0.0.0/8)' }),
    RECOVERY_ENABLED: boolean(IDEMPOTENCY_DEFAULTS.recovery.enabled),
    RECOVERY_INTERVAL: duration(IDEMPOTENCY_DEFAULTS.recovery.interval),
    METRICS_TOKEN: emptyToUndefined.refine((v) => v === undefined || /^[\x21-\x7e]{16,512}$/.test(v), {
      // Never echo the token itself.
      message: 'expected at least 16 printable characters without spaces',
    }),
    METRICS_PORT: optionalPort,
    METRICS_HOST: z.string().default('127.0.0.1').transform((v) => v.trim()),
    RATE_LIMIT_PER_CLIENT: integer(100, 1, 1_000_000_000),
    RATE_LIMIT_UNAUTHENTICATED: integer(60, 1, 1_000_000_000),
    // Order confirmations sent (POST /orders/{id}/confirmation), counted in Redis across instances.
    CONFIRMATIONS_PER_ORDER_PER_DAY: integer(3, 1, 1_000),
    CONFIRMATIONS_PER_CLIENT_PER_HOUR: integer(1_000, 1, 1_000_000_000),
  })
  .superRefine((env, ctx) => {
    for (const name of POSITIVE_DURATIONS) {
      if (env[name] <= 0) ctx.addIssue({ code: 'custom', path: [name], message: 'must be longer than 0' });
    }
    // A replica of the embedded server cannot exist: replicas follow an external primary.
    if (env.DATABASE_REPLICA_URLS.length > 0 && env.DATABASE_URL === undefined) {
      ctx.addIssue({ code: 'custom', path: ['DATABASE_REPLICA_URLS'], message: 'needs DATABASE_URL (the primary they replicate)' });
    }
    if (env.DATABASE_DIRECT_URL !== undefined && env.DATABASE_URL === undefined) {
      ctx.addIssue({ code: 'custom', path: ['DATABASE_DIRECT_URL'], message: 'needs DATABASE_URL (the pooler in front of that server)' });
    }
    if (env.IDEMPOTENCY_LEASE >= env.IDEMPOTENCY_RETENTION) {
      ctx.addIssue({
        code: 'custom',
        path: ['IDEMPOTENCY_LEASE'],
        message: 'must be shorter than IDEMPOTENCY_RETENTION',
      });
    }
    if (env.PAYMENTS_CONCURRENCY > 0 && env.PAYMENTS_CONCURRENCY_PER_CLIENT > env.PAYMENTS_CONCURRENCY) {
      ctx.addIssue({ code: 'custom', path: ['PAYMENTS_CONCURRENCY_PER_CLIENT'], message: 'must not exceed PAYMENTS_CONCURRENCY' });
    }
  });

type Env = z.output<typeof schema>;

/** `10.0.0.1`, `::1`, `10.0.0.0/8`, `fd00::/8`. */
function isAddressOrCidr(value: string): boolean {
  const [address, bits, ...rest] = value.split('/');
  const family = isIP(address);
  if (!family || rest.length) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

export interface AppConfig {
  /** NODE_ENV, trimmed and lower-cased. */
  nodeEnv: string;
  /** Every NODE_ENV but `development` and `test` (production, prod, staging, a typo): turns on the refusals of production.ts. */
  production: boolean;
  port: number;
  database: {
    url?: string;
    embeddedDir: string;
    embeddedPort?: number;
    poolSize: number;
    /** Read replicas of `url`: the listings read from them; keys never do. Empty: none. */
    replicaUrls: string[];
    /** Named (prepared) statements; off behind a transaction pooler that does not keep them. */
    preparedStatements: boolean;
    /** The primary without the pooler that `url` goes through: LISTEN and the migrations. */
    directUrl?: string;
  };
  /** The idempotency module's Redis store; without it, POST /orders/{id}/confirmation is not mounted. */
  redis: { url?: string };
  apiKeys: ApiKeySeed[];
  bodyLimitBytes: number;
  logLevel: Env['LOG_LEVEL'];
  corsOrigins: string[];
  idempotency: {
    leaseMs: number;
    retentionMs: number;
    claimPoolSize: number;
    purge: { enabled: boolean; cron: string; batchSize: number; budgetMs: number };
    /** Memory for completed responses served to replays without the database (0: off). */
    replayCacheBytes: number;
    /** `id:base64` keys sealing stored responses, newest first (empty: stored as sent). */
    encryptionKeys: string[];
  };
  cardNetwork: {
    /** Stripe's API base; undefined: the bundled simulator runs inside the app. */
    url?: string;
    apiKey: string;
    /** Latency of the embedded simulator. */
    delayMs: number;
    timeoutMs: number;
    maxRetries: number;
    /** Verify the network's webhooks (Stripe-Signature): an event signed with any of them. The first signs the embedded simulator's. */
    webhookSecrets: string[];
    /** How long a processed webhook event id is kept (longer than the network retries). */
    webhookEventRetentionMs: number;
  };
  recovery: { enabled: boolean; intervalMs: number };
  /** Admission control of the routes that reach the card network (0: unlimited). */
  payments: { concurrency: number; queueLimit: number; perClient: number };
  http: {
    /** Receiving a whole request (headers and body) may take this long; then 408. */
    requestTimeoutMs: number;
    /** An idle keep-alive connection is closed after this (longer than a load balancer's idle timeout). */
    keepAliveTimeoutMs: number;
    /** Proxies (addresses or CIDRs) whose X-Forwarded-For is believed; empty: none. */
    trustProxy: string[];
  };
  /**
   * Who may read /metrics: with a token, only `Authorization: Bearer <token>`;
   * with a port, it is served there (on `host`) and not on the API port; with
   * neither, it is not served at all.
   */
  metrics: { token?: string; port?: number; host: string };
  /** Per instance (see docs/security.md): requests per second per client; failed authentications per minute per address. */
  rateLimit: { perClientPerSecond: number; unauthenticatedPerMinute: number };
  /** Order confirmations one order may be sent in 24 hours, and one client in an hour (counted in Redis: every instance agrees). */
  confirmations: { perOrderPerDay: number; perClientPerHour: number };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Validates an environment (process.env by default) into typed config. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AppConfig {
  // An empty variable (`PORT=` in a compose file) means "use the default".
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''));
  const result = schema.safeParse(set);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`),
    );
  }
  const e = result.data;
  return {
    nodeEnv: e.NODE_ENV,
    production: !DEVELOPMENT_ENVIRONMENTS.includes(e.NODE_ENV),
    port: e.PORT,
    database: {
      url: e.DATABASE_URL,
      embeddedDir: e.EMBEDDED_PG_DIR,
      embeddedPort: e.EMBEDDED_PG_PORT,
      poolSize: e.DATABASE_POOL_SIZE,
      replicaUrls: e.DATABASE_REPLICA_URLS,
      preparedStatements: e.DATABASE_PREPARED_STATEMENTS,
      directUrl: e.DATABASE_DIRECT_URL,
    },
    redis: { url: e.REDIS_URL },
    apiKeys: e.API_KEYS,
    bodyLimitBytes: e.BODY_LIMIT,
    logLevel: e.LOG_LEVEL,
    corsOrigins: e.CORS_ORIGINS,
    idempotency: {
      leaseMs: e.IDEMPOTENCY_LEASE,
      retentionMs: e.IDEMPOTENCY_RETENTION,
      claimPoolSize: e.IDEMPOTENCY_CLAIM_POOL_SIZE,
      purge: {
        enabled: e.IDEMPOTENCY_PURGE_ENABLED,
        cron: e.IDEMPOTENCY_PURGE_CRON,
        batchSize: e.IDEMPOTENCY_PURGE_BATCH,
        budgetMs: e.IDEMPOTENCY_PURGE_BUDGET,
      },
      replayCacheBytes: e.IDEMPOTENCY_REPLAY_CACHE,
      encryptionKeys: e.IDEMPOTENCY_ENCRYPTION_KEYS,
    },
    cardNetwork: {
      url: e.CARD_NETWORK_URL?.replace(/\/$/, ''),
      apiKey: e.STRIPE_API_KEY.trim(),
      delayMs: e.CARD_NETWORK_DELAY,
      timeoutMs: e.CARD_NETWORK_TIMEOUT,
      maxRetries: e.CARD_NETWORK_MAX_RETRIES,
      webhookSecrets: e.STRIPE_WEBHOOK_SECRET,
      webhookEventRetentionMs: e.WEBHOOK_EVENT_RETENTION,
    },
    recovery: { enabled: e.RECOVERY_ENABLED, intervalMs: e.RECOVERY_INTERVAL },
    payments: { concurrency: e.PAYMENTS_CONCURRENCY, queueLimit: e.PAYMENTS_QUEUE_LIMIT, perClient: e.PAYMENTS_CONCURRENCY_PER_CLIENT },
    http: { requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT, keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT, trustProxy: e.TRUST_PROXY },
    metrics: { token: e.METRICS_TOKEN, port: e.METRICS_PORT, host: e.METRICS_HOST },
    rateLimit: { perClientPerSecond: e.RATE_LIMIT_PER_CLIENT, unauthenticatedPerMinute: e.RATE_LIMIT_UNAUTHENTICATED },
    confirmations: { perOrderPerDay: e.CONFIRMATIONS_PER_ORDER_PER_DAY, perClientPerHour: e.CONFIRMATIONS_PER_CLIENT_PER_HOUR },
  };
}
