import { Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { LeaseLostError, ResponseNotStoredError } from '../../contract/idempotency.errors';
import { ClaimRequest, ClaimResult, IdempotencyStore, KeyOutcome, Ownership, ScopedKey, StoredResponse } from '../../contract/idempotency.store';
import type { IdempotencyRedisClient, IdempotencyRedisOptions } from './redis-options';
import { CLAIM_LUA, COMPLETE_LUA, IdempotencyCommands, OUTCOME_LUA, RELEASE_LUA, RENEW_LUA } from './redis-scripts';

/**
 * The claim/complete protocol in Redis, for routes whose side effect does not
 * live in PostgreSQL (the library's README, "A Redis store"). One hash per key, named
 * `<prefix><id>` with the key's id (see ScopedKey: the key and the scope are
 * never stored, as in PostgreSQL), with fields
 *
 *   f  fingerprint (16 bytes)    t  fencing token     l  lease deadline, µs
 *   s  status (absent while in progress)   b  body   c  content type   o  Location
 *
 * Each step is one Lua script (EVALSHA through ioredis's defineCommand), so it
 * is atomic on the server:
 * - claim: claims an absent key, or answers the stored response, 422 or 409 in
 *   the same round trip (the seed's SET NX GET), or takes an in-progress key
 *   over once its lease has ended. The lease is judged on the Redis server's
 *   clock (TIME inside the script), never the app's.
 * - complete / release: only while the key still carries the owner's token and
 *   is unfinished. A stale owner (its lease taken over) can neither overwrite
 *   nor delete the newer claim: its completion throws LeaseLostError.
 * - The token is the server's clock in µs at the claim, and a takeover makes
 *   max(now, old + 1): strictly increasing per key while the key exists.
 * - A completed key keeps only f, s, b (c, o): its token and lease are dropped.
 * - Retention is the key's TTL, counted from the outcome as in PostgreSQL: the
 *   completion sets it to the route's retention. The claim sets it too (a key
 *   whose owner vanished is forgotten after that), and a takeover or a renewal
 *   extends it to at least the new lease, so a key never vanishes under its
 *   working owner.
 * - renew: the owner's own compare-and-set, a later lease and a larger token.
 * - A unit of work is the work itself (Redis has no transaction with it): the
 *   completion follows the handler, and when it fails otherwise than by a lost
 *   lease the work still stands (ResponseNotStoredError). No recovery points,
 *   no waiting duplicates: routes that need them are refused at startup.
 *
 * What Redis cannot give: the response is not stored atomically with the
 * side effect (a crash between the two lets a retry run it again after the
 * lease), and a failover can lose acknowledged writes (a lost key is a second
 * execution). Keys must be read from the primary: a replica rebuilds the
 * double execution that a lagging read replica causes.
 */

export const DEFAULT_CONTENT_TYPE = 'application/json; charset=utf-8';

/** The Redis keys' prefix when the options name none. */
export const DEFAULT_KEY_PREFIX = 'idempotency:';

/** Commands are answered within this, or fail (a frozen Redis is an outage, as a frozen PostgreSQL). */
const COMMAND_TIMEOUT_MS = 5_000;

export class RedisIdempotencyStore implements IdempotencyStore, OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('Idempotency');
  private readonly keyPrefix: string;
  /** The client with the store's commands: the app's at once, the store's own once it has connected. */
  private client?: IdempotencyRedisClient & IdempotencyCommands;
  private connecting?: Promise<void>;

  /**
   * The store, for `IdempotencyModule.forRoot({ stores: { redis } })`. With
   * `url` it connects when the module starts (an unreachable Redis stops the
   * startup with its reason) and quits that connection when the module stops;
   * an app's own `client` is used as is and left open.
   */
  constructor(private readonly options: IdempotencyRedisOptions) {
    if (!options.url === !options.client) throw new RangeError('RedisIdempotencyStore: give exactly one of url and client');
    this.keyPrefix = options.keyPrefix ?? DEFAULT_KEY_PREFIX;
    if (options.client) this.client = withCommands(options.client);
  }

  /** A store connected now, for code that drives it outside a module (a test, a benchmark); onModuleDestroy closes it. */
  static async create(options: IdempotencyRedisOptions): Promise<RedisIdempotencyStore> {
    const store = new RedisIdempotencyStore(options);
    await store.onModuleInit();
    return store;
  }

  /** Connects, once, from `url`. ioredis is loaded only here: an app without a Redis store need not install it. */
  onModuleInit(): Promise<void> {
    this.connecting ??= this.client ? Promise.resolve() : this.connect(this.options.url!);
    return this.connecting;
  }

  /** Quits the connection it made (a module that starts again connects anew); an app's own client stays open. */
  async onModuleDestroy(): Promise<void> {
    if (!this.options.url) return;
    // A startup that failed elsewhere may stop the module while the store still connects.
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    if (!client) return;
    this.client = undefined;
    this.connecting = undefined;
    await client.quit().catch((error: unknown) => this.logger.warn(`closing the Redis connection failed: ${(error as Error).message}`));
  }

  private async connect(url: string): Promise<void> {
    const { Redis: Client } = await import('ioredis');
    const client = new Client(url, {
      lazyConnect: true,
      connectTimeout: 3_000,
      commandTimeout: COMMAND_TIMEOUT_MS,
      // A request waits for one reconnection at most, then fails (500): never a queue of retries.
      maxRetriesPerRequest: 1,
      connectionName: 'safe-retries',
    });
    try {
      await client.connect();
    } catch (error) {
      client.disconnect();
      // Never the URL: it may carry a password.
      throw new Error(`IdempotencyModule: cannot connect to Redis (${client.options.host}:${client.options.port}): ${(error as Error).message}`, {
        cause: error,
      });
    }
    this.client = withCommands(client);
  }

  private get redis(): IdempotencyRedisClient & IdempotencyCommands {
    if (!this.client) throw new Error('the Redis store is not connected: IdempotencyModule connects the store it is given (stores.redis) at startup; RedisIdempotencyStore.create connects one now');
    return this.client;
  }

  /** The Redis key of a key: the prefix and the key's id, as the PostgreSQL row's id. */
  redisKey(at: ScopedKey): string {
    return `${this.keyPrefix}${at.id}`;
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, id, fingerprint, leaseMs, retentionMs } = request;
    const reply = await this.redis.idempotencyClaim(this.redisKey(request), fingerprint, leaseMs, retentionMs);
    switch (reply[0]) {
      case 'claimed':
      case 'taken_over':
        // Its retention starts at the completion: at least retentionMs from the claim.
        return { kind: 'claimed', owner: { scope, key, id, token: reply[1], retentionMs }, takenOver: reply[0] === 'taken_over', recovery: null, retainedForMs: retentionMs };
      case 'mismatch':
        return { kind: 'mismatch' };
      case 'in_progress':
        return { kind: 'in_progress', retryAfterMs: reply[1] };
      case 'completed': {
        const [, ttl, status, body, contentType, location] = reply;
        return {
          kind: 'completed',
          response: { status: Number(status), body, contentType: contentType ?? DEFAULT_CONTENT_TYPE, ...(location ? { location } : {}) },
          // PTTL is -1 only for a key someone made persistent: then no replay from memory.
          ...(ttl >= 0 ? { retainedForMs: ttl } : {}),
        };
      }
    }
  }

  /** The work itself: there is no transaction to run it in. */
  runUnit<T>(work: () => Promise<T>): Promise<T> {
    return work();
  }

  inUnit(): boolean {
    return false;
  }

  async complete(owner: Ownership, response: StoredResponse): Promise<void> {
    let stored: number;
    try {
      stored = await this.send(owner, response);
    } catch (error) {
      // The side effect happened: the response is answered rather than a retry invited to repeat it.
      throw new ResponseNotStoredError(error);
    }
    if (stored !== 1) throw new LeaseLostError();
  }

  private send(owner: Ownership, response: StoredResponse): Promise<number> {
    return this.redis.idempotencyComplete(
      this.redisKey(owner),
      owner.token,
      response.status,
      response.body,
      response.contentType === DEFAULT_CONTENT_TYPE ? '' : response.contentType,
      response.location ?? '',
      owner.retentionMs,
    );
  }

  async outcome(at: ScopedKey): Promise<KeyOutcome> {
    const reply = await this.redis.idempotencyOutcome(this.redisKey(at));
    if (!reply) return { state: 'unknown' };
    const [status, lease, ttl, now] = reply;
    if (status === null) return { state: 'in_progress', retryAfterMs: Math.max(0, Math.ceil((Number(lease) - Number(now)) / 1000)) };
    const expiresAt = new Date(Math.floor(Number(now) / 1000) + Math.max(ttl, 0)).toISOString();
    return { state: 'completed', status: Number(status), expiresAt };
  }

  async renew(owner: Ownership, leaseMs: number): Promise<string | null> {
    return this.redis.idempotencyRenew(this.redisKey(owner), owner.token, leaseMs);
  }

  async release(owner: Ownership): Promise<void> {
    await this.redis.idempotencyRelease(this.redisKey(owner), owner.token);
  }
}

/** The client with the store's scripts defined on it (EVALSHA, EVAL on NOSCRIPT). */
function withCommands(client: IdempotencyRedisClient): IdempotencyRedisClient & IdempotencyCommands {
  client.defineCommand('idempotencyClaim', { numberOfKeys: 1, lua: CLAIM_LUA });
  client.defineCommand('idempotencyComplete', { numberOfKeys: 1, lua: COMPLETE_LUA });
  client.defineCommand('idempotencyRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
  client.defineCommand('idempotencyRenew', { numberOfKeys: 1, lua: RENEW_LUA });
  client.defineCommand('idempotencyOutcome', { numberOfKeys: 1, lua: OUTCOME_LUA });
  return client as IdempotencyRedisClient & IdempotencyCommands;
}
