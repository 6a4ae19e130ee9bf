/**
 * The store behind @Idempotent(): all of the module's SQL sits behind this
 * interface, so a test can swap in a deliberately naive store and watch the
 * race suite catch it.
 */
export interface ClaimRequest {
  clientId: string;
  key: string;
  fingerprint: Buffer;
  leaseMs: number;
  retentionMs: number;
}

/** The right to run a request: the fencing token set by the claim. */
export interface Ownership {
  clientId: string;
  key: string;
  token: string;
}

export interface StoredResponse {
  status: number;
  body: string;
  contentType: string;
  location?: string;
}

export type ClaimResult =
  | { kind: 'claimed'; owner: Ownership; takenOver: boolean }
  | { kind: 'completed'; response: StoredResponse }
  /** `retryAfterMs`: what is left of the owner's lease (1 s when the row was not yet visible). */
  | { kind: 'in_progress'; retryAfterMs: number }
  | { kind: 'mismatch' };

export interface IdempotencyStore {
  /** Claims the key or reports its state. Commits on its own, outside any transaction. */
  claim(request: ClaimRequest): Promise<ClaimResult>;
  /**
   * Stores the response, fenced on the owner's token, inside the ambient
   * business transaction. Throws LeaseLostError when the key is no longer ours.
   */
  complete(owner: Ownership, response: StoredResponse): Promise<void>;
  /** Deletes the key if it is still ours and unfinished (after a rollback). */
  release(owner: Ownership): Promise<void>;
}

export const IDEMPOTENCY_STORE = Symbol('IDEMPOTENCY_STORE');
