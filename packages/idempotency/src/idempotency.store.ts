/**
 * The store behind @Idempotent(): all of the module's SQL sits behind this
 * interface, so a test can swap in a deliberately naive store and watch the
 * race suite catch it.
 */
export interface ClaimRequest {
  scope: string;
  key: string;
  fingerprint: Buffer;
  leaseMs: number;
  retentionMs: number;
}

/**
 * The right to run a request: the fencing token set by the claim (a renewal
 * replaces it, see LeaseKeeper), and the retention its outcome is kept for,
 * counted from the completion.
 */
export interface Ownership {
  scope: string;
  key: string;
  token: string;
  retentionMs: number;
}

export interface StoredResponse {
  status: number;
  body: string;
  contentType: string;
  location?: string;
}

/**
 * Where a phased operation stands (see PhasedOperation): the last phase that
 * committed, the state it saved, the operation's name (who can resume it without
 * a request) and the status its success answers with. Stored on the key's row.
 */
export interface RecoveryPoint {
  operation: string;
  point: string;
  state: unknown;
  status: number;
}

/**
 * `retainedForMs`: how long the database still keeps the key, as of the claim
 * statement's `now()` (so counted from when the claim was sent, it ends no later
 * than the key's `expires_at`). A store that cannot tell leaves it out, and the
 * response is then not kept in the replay cache.
 */
export type ClaimResult =
  /** `recovery`: where an operation taken over had got to (null for a fresh claim). */
  | { kind: 'claimed'; owner: Ownership; takenOver: boolean; recovery: RecoveryPoint | null; retainedForMs?: number }
  | { kind: 'completed'; response: StoredResponse; retainedForMs?: number }
  /** `retryAfterMs`: what is left of the owner's lease (1 s when the row was not yet visible). */
  | { kind: 'in_progress'; retryAfterMs: number }
  | { kind: 'mismatch' };

/**
 * Where the operation at a key stands, as its client may be told without
 * running anything: never used, or forgotten (its retention ran out);
 * in progress (`retryAfterMs`: what is left of its lease, 0 when a retry may
 * take it over now); or ended, with the status of its stored response and the
 * moment that response stops being kept (ISO 8601, the store's clock).
 */
export type KeyOutcome =
  | { state: 'unknown' }
  | { state: 'in_progress'; retryAfterMs: number }
  | { state: 'completed'; status: number; expiresAt: string };

/**
 * What every store offers: claim, fenced completion, fenced release. The
 * PostgreSQL store (IdempotencyStore) completes inside the business transaction;
 * the Redis store (RedisIdempotencyStore) after the handler, with no transaction.
 */
export interface IdempotencyKeyStore {
  /** Claims the key or reports its state. Commits on its own, outside any transaction. */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /**
   * Stores the response, fenced on the owner's token (in PostgreSQL: inside the
   * ambient business transaction), and starts the key's retention: it is kept
   * for `owner.retentionMs` from now, on the store's clock. Throws
   * LeaseLostError when the key is no longer ours.
   */
  complete(owner: Ownership, response: StoredResponse): Promise<void>;
  /**
   * Extends the owner's lease to `leaseMs` from now (the store's clock), fenced
   * on its token: the new token, or null when the key is no longer the owner's
   * (taken over, finished or gone). Commits on its own, outside any transaction.
   */
  renew(owner: Ownership, leaseMs: number): Promise<string | null>;
  /**
   * Deletes the key if it is still ours and unfinished (after a rollback), unless
   * it holds a committed recovery point: that key is kept and its lease ends now.
   */
  release(owner: Ownership): Promise<void>;
  /**
   * For `@Idempotent({ wait })`: resolves when the key is announced settled
   * (completed or released, see `announceSettled`) or after `timeoutMs`, whichever
   * comes first. Registers at once, so a settlement right after the call is not
   * missed. A store without it cannot wait: duplicates get 409 at once.
   */
  awaitSettled?(scope: string, key: string, timeoutMs: number): { settled: Promise<void>; cancel(): void };
  /** Wakes whoever awaits this key (after its completion or release committed). */
  announceSettled?(scope: string, key: string): Promise<void>;
  /** Where the operation at this key stands; reads only. */
  outcome(scope: string, key: string): Promise<KeyOutcome>;
}

/** The PostgreSQL store: the key store plus what phased operations need (recovery points). */
export interface IdempotencyStore extends IdempotencyKeyStore {
  /**
   * Records a recovery point, fenced on the owner's token, inside the ambient
   * transaction of the phase it concludes. Throws LeaseLostError when the key is
   * no longer ours.
   */
  checkpoint(owner: Ownership, recovery: RecoveryPoint): Promise<void>;
  /**
   * Deletes the key, fenced, inside the ambient transaction (a phased operation
   * that ends with nothing done undoes its phases and frees the key at once).
   * Throws LeaseLostError when the key is no longer ours.
   */
  releaseInTransaction(owner: Ownership): Promise<void>;
  /**
   * Ends the owner's lease now and keeps the key with its recovery point: after
   * an indeterminate outcome, the next attempt (a retry or the recovery job)
   * takes over at once and resumes.
   */
  yieldLease(owner: Ownership): Promise<void>;
  /**
   * Takes over up to `limit` operations left at a recovery point past their
   * lease (their request crashed or gave up), each with a new lease of its own.
   * One winner per key across instances.
   */
  takeOverAbandoned(limit: number, leaseMs: number): Promise<{ owner: Ownership; recovery: RecoveryPoint }[]>;
  /**
   * Takes over the operation at this key with a new lease, when it stands at a
   * recovery point and its lease has ended; null otherwise (finished, gone, or
   * its owner still holds the lease).
   */
  takeOverOperation(scope: string, key: string, leaseMs: number): Promise<{ owner: Ownership; recovery: RecoveryPoint } | null>;
}

/** The PostgreSQL store (IdempotencyStore). */
export const IDEMPOTENCY_STORE = Symbol('IDEMPOTENCY_STORE');
/** The Redis store (RedisIdempotencyStore), or null when the module has no `redis` option. */
export const IDEMPOTENCY_REDIS_STORE = Symbol('IDEMPOTENCY_REDIS_STORE');
