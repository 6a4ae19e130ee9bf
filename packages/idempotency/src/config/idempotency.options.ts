import { EncryptionKey, parseKeyRing } from '../contract/response-cipher';
import { Duration, formatDuration, parseDuration } from './duration';
import { DEFAULT_MESSAGES_TABLE_NAME, messagesTable } from './idempotency-messages-table';
import { DEFAULT_OUTBOX_TABLE_NAME, DEFAULT_TABLE_NAME, IdempotencyTable, idempotencyTable } from './idempotency-table';
import { IdempotencyRequest } from '../contract/idempotency-request';
import { IDEMPOTENCY_COMMIT_MODES, IDEMPOTENCY_STORE_KINDS, IdempotencyCommitMode, IdempotencyModuleOptions, IdempotencyStoreKind } from './module-options';
import type { OutboxPublisher } from '../contract/outbox-message';

/**
 * The module's options as it runs with them: every default applied and every
 * invariant checked, once, at startup (resolveIdempotencyOptions). The options
 * an app gives are in module-options.ts.
 */
export interface ResolvedIdempotencyOptions {
  migrations: boolean;
  /** The store of routes that name none. */
  store: IdempotencyStoreKind;
  /** The commit mode of routes that name none (`one` applies to non-phased PostgreSQL routes). */
  commit: IdempotencyCommitMode;
  /** The PostgreSQL store, and how the data source reaches PostgreSQL (see IdempotencyModuleOptions['postgres']). */
  postgres: {
    table: IdempotencyTable;
    claimPoolSize: number;
    preparedStatements: boolean;
    transactionPooler: boolean;
    /** Where waiting duplicates and the outbox's relay are woken: LISTEN on `url` (the data source's primary when absent), or `false`: they poll. */
    listen: { url?: string } | false;
    /** The key ring of stored responses, newest first; empty: not encrypted. */
    encryption: EncryptionKey[];
  };
  leaseMs: number;
  retentionMs: number;
  scope(request: IdempotencyRequest): string | undefined;
  /** The published policy page, when the app serves one (safe-retries/swagger); none: problems have `type: about:blank` and no Link. */
  policyUrl?: string;
  purge: { enabled: boolean; cron: string; batchSize: number; budgetMs: number };
  /** 0: no replay cache. */
  replayCacheBytes: number;
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
  postgres: { tableName: DEFAULT_TABLE_NAME, claimPoolSize: 10, transactionPooler: false },
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
  refuseMisplaced(o);
  return {
    store: resolveStore(o),
    commit: resolveCommit(o.commit),
    postgres: resolvePostgres(o.postgres),
    ...resolveTiming(o, DEFAULT_TIMING, 'IdempotencyModule'),
    scope: o.scope ?? ((req) => (req as { client?: { id?: string } }).client?.id),
    policyUrl: o.policyUrl,
    migrations: o.migrations ?? d.migrations,
    purge: {
      enabled: o.purge?.enabled ?? d.purge.enabled,
      cron: o.purge?.cron ?? d.purge.cron,
      batchSize: o.purge?.batchSize ?? d.purge.batchSize,
      budgetMs: parseDuration(o.purge?.budget ?? d.purge.budget),
    },
    replayCacheBytes: replayCacheBytes(o.replayCache),
    recovery: {
      enabled: o.recovery?.enabled ?? d.recovery.enabled,
      intervalMs: parseDuration(o.recovery?.interval ?? d.recovery.interval),
      batchSize: o.recovery?.batchSize ?? d.recovery.batchSize,
    },
    messages: resolveMessages(o.messages),
    outbox: resolveOutbox(o.outbox),
  };
}

/**
 * Names of a group's options given at the top level, and their place. Refused
 * at startup rather than ignored: an ignored `encryptionKeys` would store
 * responses in clear, an ignored `tableName` would use another table.
 */
const GROUPED = {
  tableName: 'postgres.tableName',
  claimPoolSize: 'postgres.claimPoolSize',
  preparedStatements: 'postgres.preparedStatements',
  transactionPooler: 'postgres.transactionPooler',
  listenUrl: 'postgres.listenUrl',
  encryptionKeys: 'postgres.encryptionKeys',
  redis: 'stores.redis (new RedisIdempotencyStore(options) from safe-retries/redis)',
} as const;

function refuseMisplaced(o: IdempotencyModuleOptions): void {
  const misplaced = Object.entries(GROUPED).filter(([name]) => (o as Record<string, unknown>)[name] !== undefined);
  if (misplaced.length) throw new RangeError(`IdempotencyModule: ${misplaced.map(([name, place]) => `${name} is ${place}`).join('; ')}`);
}

function resolveStore(o: IdempotencyModuleOptions): IdempotencyStoreKind {
  const store = o.store ?? 'postgres';
  if (!IDEMPOTENCY_STORE_KINDS.includes(store)) throw new RangeError(`IdempotencyModule: store must be ${IDEMPOTENCY_STORE_KINDS.join(' or ')}, not ${String(store)}`);
  if (store === 'redis' && !o.stores?.redis) throw new RangeError(`IdempotencyModule: ${storeNotGiven(store)}`);
  return store;
}

/** Why `kind` cannot serve a route: the module builds only the PostgreSQL store, and was not given this one. */
export function storeNotGiven(kind: IdempotencyStoreKind): string {
  return `store '${kind}' needs IdempotencyModule's stores.${kind} (new RedisIdempotencyStore({ url }) from safe-retries/redis)`;
}

function resolveCommit(commit: IdempotencyCommitMode | undefined): IdempotencyCommitMode {
  const mode = commit ?? IDEMPOTENCY_DEFAULTS.commit;
  if (!IDEMPOTENCY_COMMIT_MODES.includes(mode)) throw new RangeError(`IdempotencyModule: commit must be ${IDEMPOTENCY_COMMIT_MODES.join(' or ')}, not ${String(mode)}`);
  return mode;
}

function resolvePostgres(given: IdempotencyModuleOptions['postgres'] = {}): ResolvedIdempotencyOptions['postgres'] {
  const d = IDEMPOTENCY_DEFAULTS.postgres;
  const transactionPooler = given.transactionPooler ?? d.transactionPooler;
  if (given.listenUrl !== undefined && !/^postgres(ql)?:\/\//.test(given.listenUrl)) {
    throw new RangeError('IdempotencyModule: postgres.listenUrl must be a postgres:// or postgresql:// URL');
  }
  return {
    table: idempotencyTable(given.tableName ?? d.tableName),
    claimPoolSize: given.claimPoolSize ?? d.claimPoolSize,
    // A declared pooler gets unnamed statements unless the app says it keeps them.
    preparedStatements: given.preparedStatements ?? !transactionPooler,
    transactionPooler,
    listen: given.listenUrl !== undefined ? { url: given.listenUrl } : transactionPooler ? false : {},
    encryption: keyRing(given.encryptionKeys),
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
    throw new RangeError(`IdempotencyModule: postgres.encryptionKeys: ${(error as Error).message}`, { cause: error });
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
