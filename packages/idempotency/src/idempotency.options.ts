import { Reflector } from '@nestjs/core';
import { EncryptionKey, parseKeyRing } from './response-cipher';
import type { Registry } from 'prom-client';
import { Duration, formatDuration, parseDuration } from './duration';
import { DEFAULT_MESSAGES_TABLE_NAME, messagesTable } from './idempotency-messages-table';
import { IdempotencyTable, idempotencyTable } from './idempotency-table';
import type { IdempotencyRedisClient, IdempotencyRedisOptions } from './redis/redis-options';

export type { IdempotencyRedisClient, IdempotencyRedisOptions } from './redis/redis-options';

/**
 * What the module reads of a request: the same on Express and Fastify. The
 * functions of the options receive the platform's own request object; declare
 * them with its type (`(req: Request) => ...`, `(req: FastifyRequest) => ...`).
 */
export interface IdempotencyRequest {
  method: string;
  /** The path and query as received (Fastify and Express both set it). */
  url: string;
  /** Express: the URL before any router stripped a mount path. */
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
}

/** Where a route's keys are kept (see packages/idempotency/README.md, "A Redis store"). */
export const IDEMPOTENCY_STORE_KINDS = ['postgres', 'redis'] as const;
export type IdempotencyStoreKind = (typeof IDEMPOTENCY_STORE_KINDS)[number];

/** Options of `IdempotencyModule.forRoot/forRootAsync`. */
export interface IdempotencyModuleOptions {
  /**
   * The store of routes that do not name one (`@Idempotent({ store })`).
   * Default `postgres`: the key commits with the handler's writes. `redis` needs
   * the `redis` option and suits only routes whose side effect is not in this
   * database (packages/idempotency/README.md, "A Redis store").
   */
  store?: IdempotencyStoreKind;
  /** The Redis store, for `store: 'redis'` or routes with `@Idempotent({ store: 'redis' })`. Requires the `ioredis` package. */
  redis?: IdempotencyRedisOptions;
  /**
   * The table of the keys, `table` or `schema.table`. Default `idempotency_keys`.
   * Create it with `createIdempotencyMigrations(tableName)` (or the module's SQL).
   */
  tableName?: string;
  /**
   * How long a claim is honoured before a retry with the same body may take the
   * in-progress key over (the recovery from a crashed worker). Default `30s`.
   */
  lease?: Duration;
  /**
   * How long a key is kept, measured on the database clock from its creation.
   * Past it the key behaves as new and the purge job deletes it. Default `24h`.
   */
  retention?: Duration;
  /**
   * Who owns a key: the id of the authenticated principal, any non-empty string
   * of at most 255 characters (`42`, `acct_9f3`, a UUID). Keys are scoped by it,
   * never global; a request for which it returns nothing is answered 500.
   * Default: `req.client.id`.
   */
  scope?(request: IdempotencyRequest): string | undefined;
  /** Connections of the pool that commits claims and releases (synchronous_commit off). Default 10. */
  claimPoolSize?: number;
  /**
   * Name every statement the store sends, so that PostgreSQL parses and plans it
   * once per connection. Default true. Turn it off behind a pooler that does not
   * keep prepared statements across transactions (PgBouncer in transaction mode
   * before 1.21, or without max_prepared_statements): the statements are then
   * sent unnamed, parsed on every run.
   */
  preparedStatements?: boolean;
  /**
   * The data source reaches PostgreSQL through a transaction pooler (PgBouncer in
   * transaction mode), whose server connections serve one transaction and then
   * another client: nothing may rely on a session there. The claim pool then sets
   * no session parameter (its commits take the server's synchronous_commit), and
   * waiting duplicates LISTEN only on `listenUrl`. Default false.
   */
  transactionPooler?: boolean;
  /**
   * A direct (not pooled) URL of the same primary, where the one connection per
   * process that wakes waiting duplicates (`@Idempotent({ wait })`) LISTENs.
   * Default: the data source's primary, unless `transactionPooler`: then,
   * without it, waiting duplicates ask again every 250 ms instead.
   */
  listenUrl?: string;
  /** Where the idempotency policy is published: the `type` of its problems and their `Link`. */
  policyUrl?: string;
  /** A prom-client registry for the module's metrics; a private one when omitted. */
  registry?: Registry;
  /** The purge job (see IdempotencyPurgeService). */
  purge?: {
    /** Schedule the job in this process. Default true. */
    enabled?: boolean;
    /** Cron expression, 5 fields or 6 with seconds first. Default every 10 minutes. */
    cron?: string;
    /** Keys deleted per batch, each batch its own short transaction. Default 5,000. */
    batchSize?: number;
    /** Time budget of one run; the next run continues. Default `60s`. */
    budget?: Duration;
  };
  /**
   * Completed responses kept in this process's memory, so that a replay is
   * answered without a database round trip (see ReplayCache). Each is served
   * only within its key's retention on the database clock, and for at most a
   * minute before the database is asked again.
   */
  replayCache?: {
    /** Default true. Off, every replay reads its key's row. */
    enabled?: boolean;
    /** The memory it may hold (least recently used responses go first). Default 16 MiB. */
    maxBytes?: number;
  };
  /**
   * Encryption at rest of stored responses (PostgreSQL store): AES-256-GCM
   * keys as `id:base64` (32 random bytes each), newest first. New responses are
   * sealed with the first; older ones open with the key they name, so a key is
   * rotated by putting a new one first and removing the old one once no kept
   * response uses it (one retention later). Default: none (stored as sent).
   */
  encryptionKeys?: string[];
  /** The processed messages of IdempotentConsumer (exactly-once webhooks and queue messages). */
  messages?: {
    /**
     * Their table, `table` or `schema.table`. Default `idempotency_messages`.
     * Create it with `createIdempotencyMigrations(tableName, messagesTableName)`.
     */
    tableName?: string;
    /**
     * How long a processed message is remembered, on the database clock, before
     * the purge job deletes it (a redelivery after that is processed again). At
     * least as long as the senders redeliver. Default `7d`.
     */
    retention?: Duration;
  };
  /** The recovery job of phased operations (see IdempotencyRecovery). */
  recovery?: {
    /** Run the job in this process. Default true. */
    enabled?: boolean;
    /** How often it looks for operations abandoned past their lease. Default `1m`. */
    interval?: Duration;
    /** Operations taken over per run. Default 100. */
    batchSize?: number;
  };
}

/** Per-route options of `@Idempotent()`. */
export interface IdempotentOptions {
  /** Whether the route refuses requests without a key (400 `idempotency_key_missing`). Default true. */
  required?: boolean;
  /** This route's lease, overriding the module's (e.g. `'2m'` for a slow operation). */
  lease?: Duration;
  /** This route's retention, overriding the module's (e.g. `'72h'`). Stored on each key's row. */
  retention?: Duration;
  /**
   * What of the request is fingerprinted instead of the whole body: return the
   * part that defines the operation, e.g. the body without a field that
   * legitimately changes between retries. Method, path and query always count.
   */
  fingerprint?(request: IdempotencyRequest): unknown;
  /**
   * Runs the route in atomic phases instead of one transaction (for work that
   * calls something outside the database): the handler receives a
   * PhasedOperation through `@Operation()`. The value names the operation, under
   * which a resume function is registered with IdempotencyRecovery so that the
   * recovery job can finish it when no client retries.
   */
  phased?: string;
  /**
   * Opt-in: a duplicate of a request still in progress waits up to this long
   * (e.g. `'2s'`) for the owner to finish and is then answered with the replay,
   * instead of 409 at once; still 409 with Retry-After when the time is up.
   * Woken by PostgreSQL LISTEN/NOTIFY when the key settles (and asking again
   * at least once a second); behind a transaction pooler without the module's
   * `listenUrl`, by asking again every 250 ms.
   */
  wait?: Duration;
  /**
   * This route's store, overriding the module's. `redis`: the handler runs
   * without a database transaction and its response is stored after it, fenced
   * (packages/idempotency/README.md, "A Redis store"); not with `phased` or `wait` (the app
   * stops at startup with the reason).
   */
  store?: IdempotencyStoreKind;
}

export interface ResolvedIdempotencyOptions {
  table: IdempotencyTable;
  /** The store of routes that name none. */
  store: IdempotencyStoreKind;
  /** The Redis store's connection, when there is one. */
  redis?: { url?: string; client?: IdempotencyRedisClient; keyPrefix: string };
  leaseMs: number;
  retentionMs: number;
  scope(request: IdempotencyRequest): string | undefined;
  claimPoolSize: number;
  preparedStatements: boolean;
  transactionPooler: boolean;
  /** Where waiting duplicates are woken: LISTEN on `url` (the data source's primary when absent), or `false`: they poll. */
  listen: { url?: string } | false;
  policyUrl: string;
  purge: { enabled: boolean; cron: string; batchSize: number; budgetMs: number };
  /** 0: no replay cache. */
  replayCacheBytes: number;
  /** The key ring of stored responses, newest first; empty: not encrypted. */
  encryption: EncryptionKey[];
  recovery: { enabled: boolean; intervalMs: number; batchSize: number };
  messages: { table: IdempotencyTable; retentionMs: number };
}

/**
 * The defaults of every option, in one place. The resolver below is the only
 * code that applies them and checks lease against retention: for the module's
 * options, for each route's `@Idempotent()` options, and in the interceptor.
 */
export const IDEMPOTENCY_DEFAULTS = {
  lease: '30s',
  retention: '24h',
  claimPoolSize: 10,
  preparedStatements: true,
  transactionPooler: false,
  policyUrl: '/docs/idempotency',
  purge: { enabled: true, cron: '0 */10 * * * *', batchSize: 5_000, budget: '60s' },
  replayCache: { enabled: true, maxBytes: 16 * 1024 * 1024 },
  recovery: { enabled: true, interval: '1m', batchSize: 100 },
  messages: { tableName: DEFAULT_MESSAGES_TABLE_NAME, retention: '7d' },
} as const;

export interface Timing {
  leaseMs: number;
  retentionMs: number;
}

/**
 * Lease and retention in milliseconds, each given or else `inherited` (the
 * module's, for a route; the defaults, for the module), checked together:
 * the lease must be longer than 0 and shorter than the retention. Without
 * `inherited` (a route's options read at decoration time, before the module's
 * are known) only what is given is checked.
 */
export function resolveTiming(given: { lease?: Duration; retention?: Duration }, inherited: Timing, where: string): Timing;
export function resolveTiming(given: { lease?: Duration; retention?: Duration }, inherited: undefined, where: string): Partial<Timing>;
export function resolveTiming(given: { lease?: Duration; retention?: Duration }, inherited: Timing | undefined, where: string): Partial<Timing> {
  const leaseMs = given.lease === undefined ? inherited?.leaseMs : parseDuration(given.lease);
  const retentionMs = given.retention === undefined ? inherited?.retentionMs : parseDuration(given.retention);
  if (leaseMs !== undefined && leaseMs <= 0) throw new RangeError(`${where}: the lease must be longer than 0`);
  if (leaseMs !== undefined && retentionMs !== undefined && leaseMs >= retentionMs) {
    throw new RangeError(`${where}: the lease (${formatDuration(leaseMs)}) must be shorter than the retention (${formatDuration(retentionMs)})`);
  }
  return { leaseMs, retentionMs };
}

const DEFAULT_TIMING: Timing = {
  leaseMs: parseDuration(IDEMPOTENCY_DEFAULTS.lease),
  retentionMs: parseDuration(IDEMPOTENCY_DEFAULTS.retention),
};

/** The module's options with every default applied and every invariant checked (at startup). */
export function resolveIdempotencyOptions(o: IdempotencyModuleOptions): ResolvedIdempotencyOptions {
  const d = IDEMPOTENCY_DEFAULTS;
  return {
    table: idempotencyTable(o.tableName),
    ...resolveStore(o),
    ...resolveTiming(o, DEFAULT_TIMING, 'IdempotencyModule'),
    scope: o.scope ?? ((req) => (req as { client?: { id?: string } }).client?.id),
    claimPoolSize: o.claimPoolSize ?? d.claimPoolSize,
    ...resolveConnection(o),
    policyUrl: o.policyUrl ?? d.policyUrl,
    purge: {
      enabled: o.purge?.enabled ?? d.purge.enabled,
      cron: o.purge?.cron ?? d.purge.cron,
      batchSize: o.purge?.batchSize ?? d.purge.batchSize,
      budgetMs: parseDuration(o.purge?.budget ?? d.purge.budget),
    },
    replayCacheBytes: replayCacheBytes(o.replayCache),
    encryption: keyRing(o.encryptionKeys),
    recovery: {
      enabled: o.recovery?.enabled ?? d.recovery.enabled,
      intervalMs: parseDuration(o.recovery?.interval ?? d.recovery.interval),
      batchSize: o.recovery?.batchSize ?? d.recovery.batchSize,
    },
    messages: resolveMessages(o.messages),
  };
}

function resolveStore(o: IdempotencyModuleOptions): Pick<ResolvedIdempotencyOptions, 'store' | 'redis'> {
  const store = o.store ?? 'postgres';
  if (!IDEMPOTENCY_STORE_KINDS.includes(store)) throw new RangeError(`IdempotencyModule: store must be ${IDEMPOTENCY_STORE_KINDS.join(' or ')}, not ${String(store)}`);
  if (o.redis && !o.redis.url === !o.redis.client) throw new RangeError('IdempotencyModule: redis needs exactly one of url and client');
  if (store === 'redis' && !o.redis) throw new RangeError("IdempotencyModule: store 'redis' needs the redis option ({ url } or { client })");
  return { store, redis: o.redis && { url: o.redis.url, client: o.redis.client, keyPrefix: o.redis.keyPrefix ?? 'idempotency:' } };
}

function resolveConnection(o: IdempotencyModuleOptions): Pick<ResolvedIdempotencyOptions, 'preparedStatements' | 'transactionPooler' | 'listen'> {
  const d = IDEMPOTENCY_DEFAULTS;
  const transactionPooler = o.transactionPooler ?? d.transactionPooler;
  if (o.listenUrl !== undefined && !/^postgres(ql)?:\/\//.test(o.listenUrl)) {
    throw new RangeError('IdempotencyModule: listenUrl must be a postgres:// or postgresql:// URL');
  }
  return {
    preparedStatements: o.preparedStatements ?? d.preparedStatements,
    transactionPooler,
    listen: o.listenUrl !== undefined ? { url: o.listenUrl } : transactionPooler ? false : {},
  };
}

function resolveMessages(given: IdempotencyModuleOptions['messages']): ResolvedIdempotencyOptions['messages'] {
  const d = IDEMPOTENCY_DEFAULTS.messages;
  const retentionMs = parseDuration(given?.retention ?? d.retention);
  if (retentionMs <= 0) throw new RangeError('IdempotencyModule: messages.retention must be longer than 0');
  return { table: messagesTable(given?.tableName ?? d.tableName), retentionMs };
}

function keyRing(entries: string[] | undefined): EncryptionKey[] {
  try {
    return parseKeyRing(entries ?? []);
  } catch (error) {
    throw new RangeError(`IdempotencyModule: encryptionKeys: ${(error as Error).message}`, { cause: error });
  }
}

function replayCacheBytes(given: IdempotencyModuleOptions['replayCache']): number {
  const d = IDEMPOTENCY_DEFAULTS.replayCache;
  if (!(given?.enabled ?? d.enabled)) return 0;
  const bytes = given?.maxBytes ?? d.maxBytes;
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw new RangeError(`IdempotencyModule: replayCache.maxBytes must be a whole number of bytes, not ${bytes}`);
  return bytes;
}

export const IDEMPOTENCY_OPTIONS = Symbol('IDEMPOTENCY_OPTIONS');
export const IDEMPOTENCY_REGISTRY = Symbol('IDEMPOTENCY_REGISTRY');
/** The app's TransactionHost (nestjs-cls, TypeORM adapter), checked once at startup. */
export const IDEMPOTENCY_TX_HOST = Symbol('IDEMPOTENCY_TX_HOST');
/** The app's ClsService (nestjs-cls), checked once at startup. */
export const IDEMPOTENCY_CLS = Symbol('IDEMPOTENCY_CLS');

/** Route metadata of @Idempotent(), read by the interceptor (handler first, then controller). */
export const IdempotentMetadata = Reflector.createDecorator<IdempotentOptions>();

/** The OpenAPI extension @Idempotent() adds to its operation. */
export const X_IDEMPOTENCY = 'x-idempotency';
