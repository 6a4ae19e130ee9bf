import { Logger, OnModuleDestroy } from '@nestjs/common';
import { LeaseLostError } from './idempotency.errors';
import type { IdempotencyRedisClient, ResolvedIdempotencyOptions } from './idempotency.options';
import { ClaimRequest, ClaimResult, IdempotencyKeyStore, KeyOutcome, Ownership, StoredResponse } from './idempotency.store';
import { keyId } from './key-id';

/**
 * The claim/complete protocol in Redis, for routes whose side effect does not
 * live in PostgreSQL (packages/idempotency/README.md, "A Redis store"). One hash per key, named
 * `<prefix><keyId(scope, key)>` (the key and the scope are never stored, as in
 * PostgreSQL), with fields
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
 *
 * What Redis cannot give: the response is not stored atomically with the
 * side effect (a crash between the two lets a retry run it again after the
 * lease), and a failover can lose acknowledged writes (a lost key is a second
 * execution). Keys must be read from the primary: a replica rebuilds the
 * double execution that a lagging read replica causes.
 */

/** Absent key: claim. Otherwise 422, replay, 409, or takeover past the lease. */
const CLAIM_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease = tonumber(ARGV[2]) * 1000
local cur = redis.call('HMGET', KEYS[1], 'f', 't', 'l', 's', 'b', 'c', 'o')
if not cur[1] then
  local token = string.format('%.0f', now)
  redis.call('HSET', KEYS[1], 'f', ARGV[1], 't', token, 'l', string.format('%.0f', now + lease))
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'claimed', token, tonumber(ARGV[3])}
end
if cur[1] ~= ARGV[1] then return {'mismatch'} end
local ttl = redis.call('PTTL', KEYS[1])
if cur[4] then return {'completed', ttl, cur[4], cur[5], cur[6], cur[7]} end
local remaining = tonumber(cur[3]) - now
if remaining > 0 then return {'in_progress', math.ceil(remaining / 1000)} end
local token = string.format('%.0f', math.max(now, tonumber(cur[2]) + 1))
redis.call('HSET', KEYS[1], 't', token, 'l', string.format('%.0f', now + lease))
if ttl < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {'taken_over', token, ttl}`;

/** The response, only on the owner's unfinished key; its retention starts now. 1 stored, 0 no longer ours. */
const COMPLETE_LUA = `
local cur = redis.call('HMGET', KEYS[1], 't', 's')
if cur[1] ~= ARGV[1] or cur[2] then return 0 end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'b', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
-- A finished key needs no token or lease: nothing may complete or release it again.
redis.call('HDEL', KEYS[1], 't', 'l')
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'c', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'o', ARGV[5]) end
return 1`;

/** A later lease on the owner's unfinished key: the new token, or false when it is no longer ours. */
const RENEW_LUA = `
local cur = redis.call('HMGET', KEYS[1], 't', 's')
if cur[1] ~= ARGV[1] or cur[2] then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = string.format('%.0f', math.max(now, tonumber(cur[1]) + 1))
redis.call('HSET', KEYS[1], 't', token, 'l', string.format('%.0f', now + tonumber(ARGV[2]) * 1000))
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return token`;

/** A key's state for its client: {status or false, lease deadline µs or false, PTTL ms, server time µs}. */
const OUTCOME_LUA = `
local cur = redis.call('HMGET', KEYS[1], 's', 'l')
if not cur[1] and not cur[2] then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return {cur[1] or false, cur[2] or false, redis.call('PTTL', KEYS[1]), string.format('%.0f', now)}`;

/** Deletes the owner's unfinished key. 1 deleted, 0 no longer ours. */
const RELEASE_LUA = `
local cur = redis.call('HMGET', KEYS[1], 't', 's')
if cur[1] ~= ARGV[1] or cur[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1`;

type ClaimReply =
  | ['claimed', string, number]
  | ['mismatch']
  | ['completed', number, string, string, string | null, string | null]
  | ['in_progress', number]
  | ['taken_over', string, number];

/** The scripts, as ioredis's defineCommand adds them to the client (EVALSHA, EVAL on NOSCRIPT). */
interface IdempotencyCommands {
  idempotencyClaim(key: string, fingerprint: Buffer, leaseMs: number, retentionMs: number): Promise<ClaimReply>;
  idempotencyComplete(
    key: string,
    token: string,
    status: number,
    body: string,
    contentType: string,
    location: string,
    retentionMs: number,
  ): Promise<number>;
  idempotencyRenew(key: string, token: string, leaseMs: number): Promise<string | null>;
  idempotencyOutcome(key: string): Promise<[string | null, string | null, number, string] | null>;
  idempotencyRelease(key: string, token: string): Promise<number>;
}

export const DEFAULT_CONTENT_TYPE = 'application/json; charset=utf-8';

/** Commands are answered within this, or fail (a frozen Redis is an outage, as a frozen PostgreSQL). */
const COMMAND_TIMEOUT_MS = 5_000;

export class RedisIdempotencyStore implements IdempotencyKeyStore, OnModuleDestroy {
  private readonly logger = new Logger('Idempotency');
  private readonly redis: IdempotencyRedisClient & IdempotencyCommands;

  /**
   * `owned`: the module made the client (from a URL) and quits it at shutdown;
   * an app's own client is left open.
   */
  constructor(
    client: IdempotencyRedisClient,
    private readonly keyPrefix: string,
    private readonly owned: boolean,
  ) {
    client.defineCommand('idempotencyClaim', { numberOfKeys: 1, lua: CLAIM_LUA });
    client.defineCommand('idempotencyComplete', { numberOfKeys: 1, lua: COMPLETE_LUA });
    client.defineCommand('idempotencyRelease', { numberOfKeys: 1, lua: RELEASE_LUA });
    client.defineCommand('idempotencyRenew', { numberOfKeys: 1, lua: RENEW_LUA });
    client.defineCommand('idempotencyOutcome', { numberOfKeys: 1, lua: OUTCOME_LUA });
    this.redis = client as IdempotencyRedisClient & IdempotencyCommands;
  }

  /**
   * The store of the module's `redis` option: connects (from a URL) before the
   * app starts, so an unreachable Redis stops the startup with its reason.
   * ioredis is loaded only here: an app without a Redis store need not install it.
   */
  static async create(options: NonNullable<ResolvedIdempotencyOptions['redis']>): Promise<RedisIdempotencyStore> {
    if (options.client) return new RedisIdempotencyStore(options.client, options.keyPrefix, false);
    const { Redis: Client } = await import('ioredis');
    const client = new Client(options.url!, {
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
    return new RedisIdempotencyStore(client, options.keyPrefix, true);
  }

  async onModuleDestroy(): Promise<void> {
    if (!this.owned) return;
    await this.redis.quit().catch((error: unknown) => this.logger.warn(`closing the Redis connection failed: ${(error as Error).message}`));
  }

  /** The Redis key of (scope, key): the prefix and keyId, as the PostgreSQL row's id. */
  redisKey(scope: string, key: string): string {
    return `${this.keyPrefix}${keyId(scope, key)}`;
  }

  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const { scope, key, fingerprint, leaseMs, retentionMs } = request;
    const reply = await this.redis.idempotencyClaim(this.redisKey(scope, key), fingerprint, leaseMs, retentionMs);
    switch (reply[0]) {
      case 'claimed':
      case 'taken_over':
        // Its retention starts at the completion: at least retentionMs from the claim.
        return { kind: 'claimed', owner: { scope, key, token: reply[1], retentionMs }, takenOver: reply[0] === 'taken_over', recovery: null, retainedForMs: retentionMs };
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

  async complete(owner: Ownership, response: StoredResponse): Promise<void> {
    const stored = await this.redis.idempotencyComplete(
      this.redisKey(owner.scope, owner.key),
      owner.token,
      response.status,
      response.body,
      response.contentType === DEFAULT_CONTENT_TYPE ? '' : response.contentType,
      response.location ?? '',
      owner.retentionMs,
    );
    if (stored !== 1) throw new LeaseLostError();
  }

  async outcome(scope: string, key: string): Promise<KeyOutcome> {
    const reply = await this.redis.idempotencyOutcome(this.redisKey(scope, key));
    if (!reply) return { state: 'unknown' };
    const [status, lease, ttl, now] = reply;
    if (status === null) return { state: 'in_progress', retryAfterMs: Math.max(0, Math.ceil((Number(lease) - Number(now)) / 1000)) };
    const expiresAt = new Date(Math.floor(Number(now) / 1000) + Math.max(ttl, 0)).toISOString();
    return { state: 'completed', status: Number(status), expiresAt };
  }

  async renew(owner: Ownership, leaseMs: number): Promise<string | null> {
    return this.redis.idempotencyRenew(this.redisKey(owner.scope, owner.key), owner.token, leaseMs);
  }

  async release(owner: Ownership): Promise<void> {
    await this.redis.idempotencyRelease(this.redisKey(owner.scope, owner.key), owner.token);
  }
}
