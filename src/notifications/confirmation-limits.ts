import { Logger, OnModuleDestroy } from '@nestjs/common';
import { Redis } from 'ioredis';
import { problems } from '../http/problem';
import type { AppConfig } from '../config/config';

/**
 * How many order confirmations may go out: per order in 24 hours, per client
 * in an hour. A confirmation is a message to an address the client chooses,
 * so without a cap one API key (leaked, or a retry loop gone wrong) sends
 * without end, to anyone, in our name.
 *
 * The counters live in Redis (the route is mounted only with REDIS_URL):
 * every instance counts in the same place, so N instances allow what one
 * does. One Lua script checks both counters and takes one from each,
 * atomically: concurrent sends can never pass a cap together. A window starts at its first send and lasts its length
 * (a counter expires with it, so nothing needs purging); past the cap the
 * answer is 429 with Retry-After, the time until that window ends.
 *
 * A confirmation is counted before it is queued: one whose transaction then
 * fails, or whose send fails, still counts. A replay of a key is answered
 * before the handler runs and counts nothing.
 * Losing Redis (a failover without persistence) resets the counts, as it
 * forgets the keys.
 */
const ORDER_WINDOW_MS = 24 * 60 * 60 * 1000;
const CLIENT_WINDOW_MS = 60 * 60 * 1000;
const KEY_PREFIX = 'confirmations:';

/**
 * KEYS: the order's counter, the client's. ARGV: the order's cap and window
 * (ms), the client's. Returns {'sent', 0} or {'order'|'client', ms until that
 * window ends}.
 */
const TAKE_LUA = `
local function exhausted(key, cap)
  return tonumber(redis.call('GET', key) or '0') >= tonumber(cap)
end
if exhausted(KEYS[1], ARGV[1]) then return {'order', redis.call('PTTL', KEYS[1])} end
if exhausted(KEYS[2], ARGV[3]) then return {'client', redis.call('PTTL', KEYS[2])} end
for i, key in ipairs(KEYS) do
  if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, ARGV[i * 2]) end
end
return {'sent', 0}
`;

type TakeReply = ['sent' | 'order' | 'client', number];

interface LimitCommands {
  confirmationTake(orderKey: string, clientKey: string, orderCap: number, orderWindowMs: number, clientCap: number, clientWindowMs: number): Promise<TakeReply>;
}

export class ConfirmationLimits implements OnModuleDestroy {
  private readonly logger = new Logger('ConfirmationLimits');

  private constructor(
    private readonly redis: Redis & LimitCommands,
    private readonly caps: AppConfig['confirmations'],
  ) {}

  /** Connects before the app starts: an unreachable Redis stops the startup with its reason. */
  static async connect(config: AppConfig): Promise<ConfirmationLimits> {
    const client = new Redis(config.redis.url!, {
      lazyConnect: true,
      connectTimeout: 3_000,
      commandTimeout: 5_000,
      // A request waits for one reconnection at most, then fails: never a queue of retries.
      maxRetriesPerRequest: 1,
      connectionName: 'safe-retries-confirmations',
    });
    client.defineCommand('confirmationTake', { numberOfKeys: 2, lua: TAKE_LUA });
    try {
      await client.connect();
    } catch (error) {
      client.disconnect();
      // Never the URL: it may carry a password.
      throw new Error(`ConfirmationLimits: cannot connect to Redis (${client.options.host}:${client.options.port}): ${(error as Error).message}`, { cause: error });
    }
    return new ConfirmationLimits(client as Redis & LimitCommands, config.confirmations);
  }

  async onModuleDestroy(): Promise<void> {
    await this.redis.quit().catch((error: unknown) => this.logger.warn(`closing the Redis connection failed: ${(error as Error).message}`));
  }

  /** Counts one confirmation of the client's order, or throws 429 (Retry-After) when a cap is reached. */
  async take(clientId: string, orderId: string): Promise<void> {
    // One hash tag ({client}) puts both keys in one slot of a Redis Cluster, as a script needs.
    const prefix = `${KEY_PREFIX}{${clientId}}:`;
    const { perOrderPerDay, perClientPerHour } = this.caps;
    const [outcome, ttlMs] = await this.redis.confirmationTake(`${prefix}order:${orderId}`, `${prefix}client`, perOrderPerDay, ORDER_WINDOW_MS, perClientPerHour, CLIENT_WINDOW_MS);
    if (outcome === 'sent') return;
    // PTTL is negative only for a counter someone made persistent: then a whole window.
    const windowMs = outcome === 'order' ? ORDER_WINDOW_MS : CLIENT_WINDOW_MS;
    const retryAfterS = (ttlMs > 0 ? ttlMs : windowMs) / 1000;
    throw problems.rateLimited(
      retryAfterS,
      outcome === 'order'
        ? `This order's confirmation was sent ${perOrderPerDay} times in 24 hours, the most allowed. Retry after Retry-After seconds.`
        : `This client has sent ${perClientPerHour} order confirmations within the hour, the most allowed. Retry after Retry-After seconds.`,
    );
  }
}
