import { Inject, Injectable } from '@nestjs/common';
import { idempotencyErrors } from './idempotency.errors';
import { checkScope } from './idempotency.interceptor';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from './idempotency.options';
import { IDEMPOTENCY_REDIS_STORE, IDEMPOTENCY_STORE, IdempotencyKeyStore, KeyOutcome } from './idempotency.store';
import { parseIdempotencyKey } from './idempotency-key';

/**
 * The outcome of an operation looked up by its Idempotency-Key, for the client
 * that owns the key (its scope): whether it is unknown, still in progress, or
 * ended with which status and until when its response is kept. Nothing is run,
 * claimed or written; a client that gave up retrying learns whether its
 * operation happened without sending it again. The key is read as the header
 * is (bare or an RFC 8941 string: both are the same key); an invalid one is the
 * module's 400 `idempotency_key_invalid`. Keys of routes on the Redis store are
 * found there when the PostgreSQL store has none.
 */
@Injectable()
export class IdempotencyKeys {
  constructor(
    @Inject(IDEMPOTENCY_STORE) private readonly store: IdempotencyKeyStore,
    @Inject(IDEMPOTENCY_REDIS_STORE) private readonly redisStore: IdempotencyKeyStore | null,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async outcome(scope: string, rawKey: string): Promise<KeyOutcome & { key: string }> {
    const parsed = parseIdempotencyKey(rawKey);
    if (!parsed.ok) throw idempotencyErrors.invalid(this.options.policyUrl, parsed.reason);
    const owner = checkScope(scope);
    let found = await this.store.outcome(owner, parsed.key);
    if (found.state === 'unknown' && this.redisStore) found = await this.redisStore.outcome(owner, parsed.key);
    return { key: parsed.key, ...found };
  }
}
