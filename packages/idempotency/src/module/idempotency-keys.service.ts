import { Inject, Injectable } from '@nestjs/common';
import { idempotencyErrors } from '../contract/idempotency.errors';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { KeyOutcome } from '../contract/idempotency.store';
import { keyId } from '../contract/key-id';
import { IdempotencyStores } from '../stores/idempotency-stores';
import { parseIdempotencyKey } from '../core/idempotency-key';
import { checkScope } from '../core/scope';

/**
 * The outcome of an operation looked up by its Idempotency-Key, for the client
 * that owns the key (its scope): whether it is unknown, still in progress, or
 * ended with which status and until when its response is kept. Nothing is run,
 * claimed or written; a client that gave up retrying learns whether its
 * operation happened without sending it again. The key is read as the header
 * is (bare or an RFC 8941 string: both are the same key); an invalid one is the
 * module's 400 `idempotency_key_invalid`. Each store of the module is asked in
 * turn, the PostgreSQL store first, until one knows the key.
 */
@Injectable()
export class IdempotencyKeys {
  constructor(
    private readonly stores: IdempotencyStores,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
  ) {}

  async outcome(scope: string, rawKey: string): Promise<KeyOutcome & { key: string }> {
    const parsed = parseIdempotencyKey(rawKey);
    if (!parsed.ok) throw idempotencyErrors.invalid(this.options.policyUrl, parsed.reason);
    const owner = checkScope(scope);
    const at = { scope: owner, key: parsed.key, id: keyId(owner, parsed.key) };
    let found: KeyOutcome = { state: 'unknown' };
    for (const store of this.stores.all) {
      found = await store.outcome(at);
      if (found.state !== 'unknown') break;
    }
    return { key: parsed.key, ...found };
  }
}
