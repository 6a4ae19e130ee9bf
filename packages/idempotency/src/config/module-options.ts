import type { Type } from '@nestjs/common';
import type { Registry } from 'prom-client';
import type { Duration } from './duration';
import type { IdempotencyRequest } from '../contract/idempotency-request';
import type { IdempotentReplay } from '../contract/idempotent-replay';
import type { IdempotencyStore } from '../contract/idempotency.store';
import type { OutboxPublisher } from '../contract/outbox-message';

/**
 * The options an app gives: `IdempotencyModule.forRoot(options)` and, per
 * route, `@Idempotent(options)`. Their defaults are IDEMPOTENCY_DEFAULTS, applied
 * and checked by resolveIdempotencyOptions (idempotency.options.ts).
 */

/** Where a route's keys are kept (see packages/idempotency/docs/stores.md, "A Redis store"). */
export const IDEMPOTENCY_STORE_KINDS = ['postgres', 'redis'] as const;
export type IdempotencyStoreKind = (typeof IDEMPOTENCY_STORE_KINDS)[number];

/**
 * How a route's key commits (see packages/idempotency/docs/stores.md, "One commit
 * per new key"). `durable`: the key is claimed by a statement of its own, which
 * commits before the handler runs, and the handler's transaction completes it.
 * `one`: the key is claimed inside the handler's transaction and written with
 * its response at its commit: one commit per new key, for routes whose whole
 * effect is that one transaction (PostgreSQL store; not with `phased`).
 */
export const IDEMPOTENCY_COMMIT_MODES = ['durable', 'one'] as const;
export type IdempotencyCommitMode = (typeof IDEMPOTENCY_COMMIT_MODES)[number];

/** Options of `IdempotencyModule.forRoot/forRootAsync`. */
export interface IdempotencyModuleOptions {
  /**
   * The store of routes that do not name one (`@Idempotent({ store })`).
   * Default `postgres`: the key commits with the handler's writes. `redis` needs
   * `stores.redis` and suits only routes whose side effect is not in this
   * database (packages/idempotency/docs/stores.md, "A Redis store").
   */
  store?: IdempotencyStoreKind;
  /**
   * How routes that do not say (`@Idempotent({ commit })`) commit their key.
   * Default `durable`. `one` applies to every non-phased route of the
   * PostgreSQL store; phased routes and Redis routes keep the durable claim.
   */
  commit?: IdempotencyCommitMode;
  /**
   * The stores besides the PostgreSQL one, given as instances (as
   * `@nestjs/throttler` takes its `storage`): the module loads and builds none
   * itself, and runs the lifecycle of those it is given (a store connects at
   * startup and closes what it opened at shutdown). `redis`: a
   * `RedisIdempotencyStore` of `safe-retries/redis`
   * (`new RedisIdempotencyStore({ url })`), for `store: 'redis'` and routes
   * with `@Idempotent({ store: 'redis' })`. A route that names a store not
   * given here stops the app at startup.
   */
  stores?: { redis?: IdempotencyStore };
  /**
   * The PostgreSQL store, which the module builds on the app's data source (the
   * default: nothing to set). Its table, claim pool, statements and encryption
   * are the store's alone; `transactionPooler` and `listenUrl` say how the data
   * source reaches PostgreSQL, which the outbox's relay follows too (it LISTENs
   * where waiting duplicates do). Not here: `migrations` (they create every
   * table of the module, the processed messages' and the outbox's as well as
   * the keys', whatever store routes use) and `messages.tableName` (the
   * consumer's).
   */
  postgres?: {
    /** The table of the keys, `table` or `schema.table`. Default `idempotency_keys`. */
    tableName?: string;
    /** Connections of the pool that commits claims and releases (synchronous_commit off). Default 10. */
    claimPoolSize?: number;
    /**
     * Name every statement the store sends, so that PostgreSQL parses and plans it
     * once per connection. Default: true, false with `transactionPooler`. A pooler
     * that does not keep prepared statements across transactions (PgBouncer in
     * transaction mode before 1.21, or without max_prepared_statements) fails named
     * statements; unnamed ones are parsed on every run. Set it true behind a
     * pooler only when that pooler keeps them.
     */
    preparedStatements?: boolean;
    /**
     * The data source reaches PostgreSQL through a transaction pooler (PgBouncer in
     * transaction mode), whose server connections serve one transaction and then
     * another client: nothing may rely on a session there. The claim pool then sets
     * no session parameter (its commits take the server's synchronous_commit), and
     * waiting duplicates and the outbox's relay LISTEN only on `listenUrl`.
     * Default false.
     */
    transactionPooler?: boolean;
    /**
     * A direct (not pooled) URL of the same primary, where the one connection per
     * process that wakes waiting duplicates (`@Idempotent({ wait })`) LISTENs, and
     * the outbox's relay's. Default: the data source's primary, unless
     * `transactionPooler`: then, without it, waiting duplicates ask again every
     * 250 ms instead, and the relay looks every second.
     */
    listenUrl?: string;
    /**
     * Encryption at rest of stored responses: AES-256-GCM keys as `id:base64`
     * (32 random bytes each), newest first. New responses are sealed with the
     * first; older ones open with the key they name, so a key is rotated by
     * putting a new one first and removing the old one once no kept response
     * uses it (one retention later). Default: none (stored as sent).
     */
    encryptionKeys?: string[];
  };
  /**
   * Create and update the module's tables at startup: its pending migrations
   * (`idempotencyMigrations(postgres.tableName, messages.tableName)`) run on the
   * app's data source, recorded in its migrations table, in one transaction
   * under an advisory lock (instances that boot together run them once).
   * Default true. Off: the app runs those migrations among its own, or the
   * module's SQL.
   */
  migrations?: boolean;
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
  /** The processed messages of IdempotentConsumer (exactly-once webhooks and queue messages). */
  messages?: {
    /**
     * Their table, `table` or `schema.table`. Default `idempotency_messages`.
     * Create it with `idempotencyMigrations(postgres.tableName, messages.tableName)`.
     */
    tableName?: string;
    /**
     * How long a processed message is remembered, on the database clock, before
     * the purge job deletes it (a redelivery after that is processed again). At
     * least as long as the senders redeliver. Default `7d`.
     */
    retention?: Duration;
  };
  /**
   * The transactional outbox (see Outbox, OutboxRelay): messages added in a
   * key's transaction, delivered by a relay on every instance.
   */
  outbox?: {
    /** Delivers one message (its `id` is the downstream idempotency key). Without it no relay runs here; `Outbox.add` still works. */
    publish?: OutboxPublisher;
    /** Run the relay in this process (when there is a publisher). Default true. */
    enabled?: boolean;
    /** How long a relay holds a message it is delivering before another relay may take it. Default `1m`. */
    lease?: Duration;
    /** How long after it is added (or replayed) a failing message is retried before it becomes a dead letter (the relay's setting). Default `3d`. */
    horizon?: Duration;
    /** How long a delivered message is kept before the purge job deletes it. Default `7d`. */
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
   * For an answer that holds something never to be stored (a secret shown
   * once): a provider of the app whose `store` gives what is kept under the
   * key in place of the handler's value, and whose `replay` rebuilds each
   * replay's answer from it (see IdempotentReplay). HTTP routes only; not with
   * `phased`.
   */
  replay?: Type<IdempotentReplay>;
  /**
   * Runs the route in atomic phases instead of one transaction (for work that
   * calls something outside the database): the handler receives a
   * PhasedOperation through `@Operation()`. The value names the operation
   * (`phasedOperation<State>('name')`, or a plain string); the method marked
   * `@Resumes()` with the same name lets the recovery job finish it when no
   * client retries.
   */
  phased?: string;
  /**
   * Opt-in: a duplicate of a request still in progress waits up to this long
   * (e.g. `'2s'`) for the owner to finish and is then answered with the replay,
   * instead of 409 at once; still 409 with Retry-After when the time is up.
   * Woken by PostgreSQL LISTEN/NOTIFY when the key settles (and asking again
   * at least once a second); behind a transaction pooler without the module's
   * `postgres.listenUrl`, by asking again every 250 ms.
   */
  wait?: Duration;
  /**
   * This route's store, overriding the module's. `redis` (the store given as
   * the module's `stores.redis`): the handler runs without a database
   * transaction and its response is stored after it, fenced
   * (packages/idempotency/docs/stores.md, "A Redis store"); not with `phased` or
   * `wait`. A store the module was not given, or cannot serve the route's
   * options, stops the app at startup with the reason.
   */
  store?: IdempotencyStoreKind;
  /**
   * Where a GraphQL mutation or a message handler finds its key (an HTTP route
   * always reads the `Idempotency-Key` header). Default: for a GraphQL
   * resolver the `Idempotency-Key` header of the HTTP request that carries the
   * operation; for a message handler the payload's `idempotencyKey` field.
   * See IdempotencyKeySource.
   */
  key?: IdempotencyKeySource;
  /**
   * The scope of a message handler's keys (messages carry no authenticated
   * principal): a constant, or a function of the payload and the transport's
   * context. Default: one scope per handler, `message:` and its pattern. HTTP
   * routes and GraphQL resolvers use the module's `scope`.
   */
  messageScope?: string | ((data: unknown, transport: unknown) => string | undefined);
  /**
   * This route's commit mode, overriding the module's. `one`: the key is
   * claimed inside the handler's transaction (an advisory lock), and written
   * with the response at its commit; the lease bounds that transaction (the
   * server ends it past the lease). Only for a route whose whole effect is that
   * transaction (no call outside the database); the PostgreSQL store; not with
   * `phased` (the app stops at startup with the reason).
   */
  commit?: IdempotencyCommitMode;
}

/**
 * Where a GraphQL mutation or a message handler finds its Idempotency-Key:
 *
 * - `{ header: 'idempotency-key' }`: GraphQL: a header of the HTTP request
 *   that carries the operation; messages: a header of the transport's message
 *   (NATS, Kafka, RabbitMQ, Redis; not TCP), read from the transport context's
 *   `getHeaders()` or its message's `headers` / `properties.headers`;
 * - `{ arg: 'idempotencyKey' }`: GraphQL: a top-level argument of the field;
 * - `{ field: 'idempotencyKey' }`: messages: a top-level field of the payload;
 * - a function of the field's args (GraphQL) or the payload (messages) and the
 *   context (the GraphQL context, or the transport's): the key, or undefined
 *   when the operation has none.
 *
 * The key is checked like the header's (1 to 255 printable ASCII characters).
 */
export type IdempotencyKeySource =
  | { header: string }
  | { arg: string }
  | { field: string }
  | ((input: unknown, context: unknown) => string | undefined);
