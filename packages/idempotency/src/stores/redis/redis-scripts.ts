/**
 * The Redis store's Lua scripts (see RedisIdempotencyStore), each one step of
 * the protocol, atomic on the server, and the commands ioredis's defineCommand
 * makes of them.
 */

/** Absent key: claim. Otherwise 422, replay, 409, or takeover past the lease. */
export const CLAIM_LUA = `
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
export const COMPLETE_LUA = `
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
export const RENEW_LUA = `
local cur = redis.call('HMGET', KEYS[1], 't', 's', 'l')
if cur[1] ~= ARGV[1] or cur[2] then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local token = string.format('%.0f', math.max(now, tonumber(cur[1]) + 1))
local lease = math.max(tonumber(cur[3]), now + tonumber(ARGV[2]) * 1000)
redis.call('HSET', KEYS[1], 't', token, 'l', string.format('%.0f', lease))
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return token`;

/** A key's state for its client: {status or false, lease deadline µs or false, PTTL ms, server time µs}. */
export const OUTCOME_LUA = `
local cur = redis.call('HMGET', KEYS[1], 's', 'l')
if not cur[1] and not cur[2] then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
return {cur[1] or false, cur[2] or false, redis.call('PTTL', KEYS[1]), string.format('%.0f', now)}`;

/** Deletes the owner's unfinished key. 1 deleted, 0 no longer ours. */
export const RELEASE_LUA = `
local cur = redis.call('HMGET', KEYS[1], 't', 's')
if cur[1] ~= ARGV[1] or cur[2] then return 0 end
redis.call('DEL', KEYS[1])
return 1`;

export type ClaimReply =
  | ['claimed', string, number]
  | ['mismatch']
  | ['completed', number, string, string, string | null, string | null]
  | ['in_progress', number]
  | ['taken_over', string, number];

/** The scripts, as ioredis's defineCommand adds them to the client (EVALSHA, EVAL on NOSCRIPT). */
export interface IdempotencyCommands {
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
