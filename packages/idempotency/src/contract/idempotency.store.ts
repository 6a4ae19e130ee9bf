/**
 * The store contract: what the orchestration (the interceptor, PhasedOperation,
 * the recovery job) needs of a place that keeps keys, each step once. The
 * protocol is written once over it (see OperationAttempt); stores differ only
 * in how they keep keys and in how a unit of work commits:
 *
 * - `runUnit(work)`: the PostgreSQL store runs it in a transaction of the
 *   ambient TransactionHost, so the completion (and a phase's recovery point)
 *   commits with the handler's writes; the Redis store runs `work` as it is,
 *   and its completion follows the work.
 * - What a store cannot do is absent from it, not a flag: `recovery` (recovery
 *   points, for phased operations and the recovery job), `settlement` (waking
 *   waiting duplicates, for `@Idempotent({ wait })`) and `oneCommit` (claims
 *   held by the unit itself, for `@Idempotent({ commit: 'one' })`). A route that
 *   needs one is refused at startup when its store has none (IdempotencyStores).
 */
/**
 * A key as a store is given it: its scope, the key, and `id`, the key's id
 * (the first 128 bits of SHA-256(scope, NUL, key), as a uuid; see keyId),
 * derived once where the request (or the lookup) is built and carried with it.
 * A store names the key by `id` and never derives it again.
 */
export interface ScopedKey {
  scope: string;
  key: string;
  id: string;
}

export interface ClaimRequest extends ScopedKey {
  fingerprint: Buffer;
  leaseMs: number;
  retentionMs: number;
}

/**
 * The right to run a request: the fencing token set by the claim (a renewal
 * replaces it, see LeaseKeeper), and the retention its outcome is kept for,
 * counted from the completion.
 */
export interface Ownership extends ScopedKey {
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
 * a request) and the status its success answers with. Stored with the key.
 */
export interface RecoveryPoint {
  operation: string;
  point: string;
  state: unknown;
  status: number;
}

/**
 * `retainedForMs`: how long the store still keeps the key, as of the claim
 * (so counted from when the claim was sent, it ends no later than the key's
 * expiry). A store that cannot tell leaves it out, and the response is then
 * not kept in the replay cache.
 */
export type ClaimResult =
  /** `recovery`: where an operation taken over had got to (null for a fresh claim, or a store without recovery points). */
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

export interface IdempotencyStore {
  /**
   * Claims the key or reports its state: a new key (or one past its retention)
   * is claimed; a key in progress whose lease has ended is taken over, one
   * winner; otherwise the stored response, another request's fingerprint, or
   * the owner still at work. Commits on its own, outside any unit.
   */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /**
   * Stores the response, fenced on the owner's token, inside the current unit
   * (see runUnit), and starts the key's retention: it is kept for
   * `owner.retentionMs` from now, on the store's clock. Throws LeaseLostError
   * when the key is no longer the owner's (nothing of the unit may commit), and
   * ResponseNotStoredError when the work stands but its response could not be
   * stored (a store whose units are not transactions); after any other error
   * nothing of the unit commits.
   */
  complete(owner: Ownership, response: StoredResponse): Promise<void>;
  /**
   * Extends the owner's lease to at least `leaseMs` from now (the store's
   * clock; a renewal never shortens it), fenced on its token: the new token,
   * after which the old one fences nothing, or null when the key is no longer
   * the owner's (taken over, finished or gone). Commits on its own.
   */
  renew(owner: Ownership, leaseMs: number): Promise<string | null>;
  /**
   * Gives the key up after an attempt that did not end its operation, fenced:
   * deletes it while it is the owner's and unfinished, unless a recovery point
   * committed: that key is kept and its lease ends now, so the next attempt
   * resumes it at once. Commits on its own; a stale owner changes nothing.
   */
  release(owner: Ownership): Promise<void>;
  /** Where the operation at this key stands; reads only. */
  outcome(at: ScopedKey): Promise<KeyOutcome>;
  /**
   * Runs one unit of work: the writes `work` makes and the store's fenced
   * writes inside it (complete, and a recovery point's checkpoint or discard)
   * commit together where the store has transactions. Joins a unit already
   * open in this context (the app's own transaction).
   */
  runUnit<T>(work: () => Promise<T>): Promise<T>;
  /**
   * Whether a unit is open in this context. After one of the module's units
   * ended, an open one is the app's own, so what the module stored is not final
   * until the app commits.
   */
  inUnit(): boolean;
  /** Recovery points of phased operations; absent: the store has none. */
  readonly recovery?: RecoveryPoints;
  /** Wakes duplicates waiting for a key to settle; absent: they cannot wait. */
  readonly settlement?: KeySettlement;
  /** Claims held by a unit itself, for routes that commit once; absent: they cannot. */
  readonly oneCommit?: OneCommitKeys;
}

/**
 * A key claimed by the unit that runs its request (see OneCommitRun): the
 * claim is the first statement of the unit and lasts exactly as long as the
 * unit (its commit, its rollback, or the end of its connection frees it), and
 * the key is written once, with its response, by the unit's last statement.
 * A new key then costs one commit, and a crashed owner leaves nothing to take
 * over: its key is free at once. The lease bounds the unit instead: the store
 * ends a unit that runs past it, so it cannot commit.
 */
export interface OneCommitKeys {
  /**
   * The unit's first statement (inside runUnit): claims the key for the unit,
   * or reports its state as `claim` does (`in_progress`: another unit holds
   * it). Claimed, the key has no record until `complete`.
   */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /**
   * The unit's last statement: writes the key with its response, retained for
   * `request.retentionMs` from now. Throws LeaseLostError when another unit
   * committed the key first (nothing of this unit may commit; a new claim
   * reads what that unit stored).
   */
  complete(request: ClaimRequest, response: StoredResponse): Promise<void>;
}

/** What phased operations and the recovery job need of a store. */
export interface RecoveryPoints {
  /**
   * Records a recovery point, fenced on the owner's token, inside the current
   * unit: it commits with the writes of the phase it concludes. Throws
   * LeaseLostError when the key is no longer the owner's.
   */
  checkpoint(owner: Ownership, recovery: RecoveryPoint): Promise<void>;
  /**
   * Deletes the key and its recovery point, fenced, inside the current unit (an
   * operation that ends with nothing done undoes its phases and frees the key
   * in one unit). Throws LeaseLostError when the key is no longer the owner's.
   */
  discard(owner: Ownership): Promise<void>;
  /**
   * Takes over, with a new lease, an operation left at a recovery point whose
   * lease has ended (its request crashed or gave up): the one at `at` when
   * given (IdempotencyRecovery.takeOver, e.g. an app that settles it on the
   * outside system's word), else any one (the recovery job's next, the
   * longest abandoned first). Null when there is none (at `at`: finished,
   * gone, or its owner still holds the lease). One winner per key across
   * instances.
   */
  takeOver(leaseMs: number, at?: ScopedKey): Promise<{ owner: Ownership; recovery: RecoveryPoint } | null>;
}

/** Waiting duplicates (`@Idempotent({ wait })`). */
export interface KeySettlement {
  /**
   * Resolves when the key is announced settled (completed or released, see
   * `announceSettled`) or after `timeoutMs`, whichever comes first. Registers at
   * once, so a settlement right after the call is not missed.
   */
  awaitSettled(at: ScopedKey, timeoutMs: number): { settled: Promise<void>; cancel(): void };
  /** Wakes whoever awaits this key (after its completion or release committed). */
  announceSettled(at: ScopedKey): Promise<void>;
}
