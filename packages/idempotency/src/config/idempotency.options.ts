import { EncryptionKey, parseKeyRing } from '../contract/response-cipher';
import { Duration, formatDuration, parseDuration } from './duration';
import { DEFAULT_MESSAGES_TABLE_NAME, messagesTable } from './idempotency-messages-table';
import { DEFAULT_OUTBOX_TABLE_NAME, IdempotencyTable, idempotencyTable } from './idempotency-table';
import { IDEMPOTENCY_COMMIT_MODES, IDEMPOTENCY_STORE_KINDS, IdempotencyCommitMode, IdempotencyModuleOptions, IdempotencyRequest, IdempotencyStoreKind } from './module-options';
import type { IdempotencyRedisClient } from './redis-options';
import type { OutboxPublisher } from '../contract/outbox-message';

/**
 * The module's options as it runs with them: every default applied and every
 * invariant checked, once, at startup (resolveIdempotencyOptions). The options
 * an app gives are in module-options.ts.
 */
export interface ResolvedIdempotencyOptions {
  table: IdempotencyTable;
  migrations: boolean;
  /** The store of routes that name none. */
  store: IdempotencyStoreKind;
  /** The commit mode of routes that name none (`one` applies to non-phased PostgreSQL routes). */
  commit: IdempotencyCommitMode;
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
  /** The published policy page, when the app serves one (safe-retries/swagger); none: problems have `type: about:blank` and no Link. */
  policyUrl?: string;
  purge: { enabled: boolean; cron: string; batchSize: number; budgetMs: number };
  /** 0: no replay cache. */
  replayCacheBytes: number;
  /** The key ring of stored responses, newest first; empty: not encrypted. */
  encryption: EncryptionKey[];
  recovery: { enabled: boolean; intervalMs: number; batchSize: number };
  messages: { table: IdempotencyTable; retentionMs: number };
  /** The outbox; `channel` is where adds are announced (NOTIFY). */
  outbox: { table: IdempotencyTable; channel: string; publish?: OutboxPublisher; enabled: boolean; leaseMs: number; horizonMs: number; retentionMs: number };
}

/**
 * The defaults of every option, in one place. The resolver below is the only
 * code that applies them and checks lease against retention: for the module's
 * options, for each route's `@Idempotent()` options, and in the interceptor.
 */
export const IDEMPOTENCY_DEFAULTS = {
  commit: 'durable',
  lease: '30s',
  retention: '24h',
  claimPoolSize: 10,
  transactionPooler: false,
  purge: { enabled: true, cron: '0 */10 * * * *', batchSize: 5_000, budget: '60s' },
  replayCache: { enabled: true, maxBytes: 16 * 1024 * 1024 },
  recovery: { enabled: true, interval: '1m', batchSize: 100 },
  messages: { tableName: DEFAULT_MESSAGES_TABLE_NAME, retention: '7d' },
  outbox: { enabled: true, lease: '1m', horizon: '3d', retention: '7d' },
  migrations: true,
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
    commit: resolveCommit(o.commit),
    ...resolveTiming(o, DEFAULT_TIMING, 'IdempotencyModule'),
    scope: o.scope ?? ((req) => (req as { client?: { id?: string } }).client?.id),
    claimPoolSize: o.claimPoolSize ?? d.claimPoolSize,
    ...resolveConnection(o),
    policyUrl: o.policyUrl,
    migrations: o.migrations ?? d.migrations,
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
    outbox: resolveOutbox(o.outbox),
  };
}

function resolveStore(o: IdempotencyModuleOptions): Pick<ResolvedIdempotencyOptions, 'store' | 'redis'> {
  const store = o.store ?? 'postgres';
  if (!IDEMPOTENCY_STORE_KINDS.includes(store)) throw new RangeError(`IdempotencyModule: store must be ${IDEMPOTENCY_STORE_KINDS.join(' or ')}, not ${String(store)}`);
  if (o.redis && !o.redis.url === !o.redis.client) throw new RangeError('IdempotencyModule: redis needs exactly one of url and client');
  if (store === 'redis' && !o.redis) throw new RangeError("IdempotencyModule: store 'redis' needs the redis option ({ url } or { client })");
  return { store, redis: o.redis && { url: o.redis.url, client: o.redis.client, keyPrefix: o.redis.keyPrefix ?? 'idempotency:' } };
}

function resolveCommit(commit: IdempotencyCommitMode | undefined): IdempotencyCommitMode {
  const mode = commit ?? IDEMPOTENCY_DEFAULTS.commit;
  if (!IDEMPOTENCY_COMMIT_MODES.includes(mode)) throw new RangeError(`IdempotencyModule: commit must be ${IDEMPOTENCY_COMMIT_MODES.join(' or ')}, not ${String(mode)}`);
  return mode;
}

function resolveConnection(o: IdempotencyModuleOptions): Pick<ResolvedIdempotencyOptions, 'preparedStatements' | 'transactionPooler' | 'listen'> {
  const d = IDEMPOTENCY_DEFAULTS;
  const transactionPooler = o.transactionPooler ?? d.transactionPooler;
  if (o.listenUrl !== undefined && !/^postgres(ql)?:\/\//.test(o.listenUrl)) {
    throw new RangeError('IdempotencyModule: listenUrl must be a postgres:// or postgresql:// URL');
  }
  return {
    // A declared pooler gets unnamed statements unless the app says it keeps them.
    preparedStatements: o.preparedStatements ?? !transactionPooler,
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

function resolveOutbox(given: IdempotencyModuleOptions['outbox']): ResolvedIdempotencyOptions['outbox'] {
  const d = IDEMPOTENCY_DEFAULTS.outbox;
  if (given?.publish !== undefined && typeof given.publish !== 'function') throw new TypeError('IdempotencyModule: outbox.publish must be a function');
  const ms = (name: 'lease' | 'horizon' | 'retention') => {
    const value = parseDuration(given?.[name] ?? d[name]);
    if (value <= 0) throw new RangeError(`IdempotencyModule: outbox.${name} must be longer than 0`);
    return value;
  };
  return {
    table: idempotencyTable(DEFAULT_OUTBOX_TABLE_NAME),
    channel: DEFAULT_OUTBOX_TABLE_NAME,
    publish: given?.publish,
    enabled: given?.enabled ?? d.enabled,
    leaseMs: ms('lease'),
    horizonMs: ms('horizon'),
    retentionMs: ms('retention'),
  };
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
/** The TransactionHost (nestjs-cls, TypeORM adapter) of the module's transactional plugin. */
export const IDEMPOTENCY_TX_HOST = Symbol('IDEMPOTENCY_TX_HOST');
/** nestjs-cls's ClsService. */
export const IDEMPOTENCY_CLS = Symbol('IDEMPOTENCY_CLS');
