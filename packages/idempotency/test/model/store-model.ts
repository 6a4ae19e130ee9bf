import { isDeepStrictEqual } from 'node:util';
import type { ClaimResult, KeyOutcome, Ownership, StoredResponse } from 'safe-retries/testing';

/**
 * A model of the store contract (IdempotencyStore, its core: claim, complete,
 * renew, release, outcome), against which model.spec.ts checks a real store
 * step by step. Time is the store's, so the model knows a lease or a retention
 * only as `live` (it cannot end during a run), `ended` (a tick passed since it
 * was set) or `maybe` (short, set since the last tick: it may have ended).
 * A key that may be past both its lease and its retention may already be gone
 * (the Redis store forgets it at once, the PostgreSQL store keeps the row until
 * a claim replaces it or the purge deletes it): either answer is allowed, and
 * the answer tells the model which.
 */
export type Clock = 'live' | 'maybe' | 'ended';

export interface KeyState {
  fingerprint: string;
  status: 'in_progress' | 'completed';
  /** The fencing token of the owner that may complete it (in progress only). */
  token?: string;
  lease: Clock;
  retention: Clock;
  response?: StoredResponse;
}

export type Op =
  | { kind: 'claim'; key: string; fingerprint: string; leaseMs: number; retentionMs: number }
  | { kind: 'complete'; key: string; owner: Ownership; response: StoredResponse }
  | { kind: 'renew'; key: string; owner: Ownership; leaseMs: number }
  | { kind: 'release'; key: string; owner: Ownership }
  | { kind: 'outcome'; key: string };

/** What an operation answered: its result, or the name of the error it threw. */
export type Observed = { result: unknown } | { error: string };

/** A short lease or retention (it ends within a tick); anything longer outlives a run. */
export const SHORT_MS = 2;

const clockOf = (ms: number): Clock => (ms <= SHORT_MS ? 'maybe' : 'live');
/** The later of two deadlines: a renewal never shortens a lease. */
const later = (a: Clock, b: Clock): Clock => (a === 'live' || b === 'live' ? 'live' : a === 'maybe' || b === 'maybe' ? 'maybe' : 'ended');
const cases = (clock: Clock): boolean[] => (clock === 'live' ? [false] : clock === 'ended' ? [true] : [false, true]);

export class StoreModel {
  readonly keys = new Map<string, KeyState>();
  /** Every ownership a claim or a renewal handed out, per key, stale ones included. */
  readonly owners = new Map<string, Ownership[]>();
  /** What ran and what it answered, per key: printed with a violation. */
  readonly history = new Map<string, string[]>();

  clone(): StoreModel {
    const copy = new StoreModel();
    for (const [k, s] of this.keys) copy.keys.set(k, { ...s });
    for (const [k, o] of this.owners) copy.owners.set(k, [...o]);
    for (const [k, h] of this.history) copy.history.set(k, [...h]);
    return copy;
  }

  /** Takes `other`'s state as its own (the serialisation that fitted a batch's answers). */
  adopt(other: StoreModel): void {
    for (const [mine, theirs] of [
      [this.keys, other.keys],
      [this.owners, other.owners],
      [this.history, other.history],
    ] as [Map<string, unknown>, Map<string, unknown>][]) {
      mine.clear();
      for (const [k, v] of theirs) mine.set(k, v);
    }
  }

  /** A tick passed: every short lease and retention set before it has ended. */
  tick(): void {
    for (const s of this.keys.values()) {
      if (s.lease === 'maybe') s.lease = 'ended';
      if (s.retention === 'maybe') s.retention = 'ended';
    }
  }

  /**
   * Checks what `op` answered against the model and applies it: null when
   * allowed, else why not. `raced`: another operation that writes the same key
   * ran at the same time.
   */
  apply(op: Op, observed: Observed, raced = false): string | null {
    const verdict = this.check(op, observed, raced);
    const line = `${describeOp(op)} -> ${describeObserved(observed)}${verdict ? `   <-- ${verdict}` : ''}`;
    this.history.set(op.key, [...(this.history.get(op.key) ?? []), line]);
    return verdict;
  }

  private check(op: Op, observed: Observed, raced: boolean): string | null {
    if ('error' in observed && !(op.kind === 'complete' && observed.error === 'LeaseLostError')) return `unexpected error ${observed.error}`;
    switch (op.kind) {
      case 'claim':
        return this.claim(op, (observed as { result: ClaimResult }).result, raced);
      case 'complete':
        return this.complete(op, 'error' in observed ? 'lost' : 'stored');
      case 'renew':
        return this.renew(op, (observed as { result: string | null }).result);
      case 'release':
        return this.release(op);
      case 'outcome':
        return this.outcome(op, (observed as { result: KeyOutcome }).result);
    }
  }

  /** Whether the key may be past its lease (in progress) and its retention: to be replaced, or gone. */
  private replaceable(s: KeyState, leaseEnded: boolean, retentionEnded: boolean): boolean {
    return retentionEnded && (s.status === 'completed' || leaseEnded);
  }

  private expectedClaims(s: KeyState | undefined, fingerprint: string): Set<string> {
    if (!s) return new Set(['fresh']);
    const expected = new Set<string>();
    for (const leaseEnded of s.status === 'in_progress' ? cases(s.lease) : [true]) {
      for (const retentionEnded of cases(s.retention)) {
        if (this.replaceable(s, leaseEnded, retentionEnded)) expected.add('fresh');
        else if (s.fingerprint !== fingerprint) expected.add('mismatch');
        else if (s.status === 'completed') expected.add('completed');
        else expected.add(leaseEnded ? 'takeover' : 'in_progress');
      }
    }
    return expected;
  }

  /**
   * A claim that meets the key's row changed by a write running at the same
   * time may answer "in progress, retry" (ClaimResult: the row was not yet
   * visible): it changes nothing, so it fits any order.
   */
  private claim(op: Extract<Op, { kind: 'claim' }>, r: ClaimResult, raced: boolean): string | null {
    if (raced && r.kind === 'in_progress') return r.retryAfterMs > 0 ? null : `in progress with retryAfterMs ${r.retryAfterMs}`;
    const s = this.keys.get(op.key);
    const expected = this.expectedClaims(s, op.fingerprint);
    const got = r.kind === 'claimed' ? (r.takenOver ? 'takeover' : 'fresh') : r.kind;
    if (!expected.has(got)) return `claim answered ${got}, the contract allows ${[...expected].join(' or ')}`;
    if (r.kind === 'completed' && !isDeepStrictEqual(normal(r.response), normal(s?.response))) return 'the replay is not the stored response';
    if (r.kind === 'in_progress' && !(r.retryAfterMs > 0)) return `in progress with retryAfterMs ${r.retryAfterMs}`;
    if (r.kind !== 'claimed') return null;
    this.owners.set(op.key, [...(this.owners.get(op.key) ?? []), r.owner]);
    if (r.takenOver && s) {
      if (s.token !== undefined && BigInt(r.owner.token) <= BigInt(s.token)) return 'a takeover token is not above the one it replaces';
      this.keys.set(op.key, { ...s, token: r.owner.token, lease: clockOf(op.leaseMs) });
    } else {
      this.keys.set(op.key, { fingerprint: op.fingerprint, status: 'in_progress', token: r.owner.token, lease: clockOf(op.leaseMs), retention: clockOf(op.retentionMs) });
    }
    return null;
  }

  /** The owner's key, in progress: null when the key is not (or no longer) the owner's. */
  private ownersKey(key: string, owner: Ownership): KeyState | null {
    const s = this.keys.get(key);
    return s && s.status === 'in_progress' && s.token === owner.token ? s : null;
  }

  private mayBeGone(s: KeyState): boolean {
    return cases(s.lease).includes(true) && cases(s.retention).includes(true);
  }

  private complete(op: Extract<Op, { kind: 'complete' }>, got: 'stored' | 'lost'): string | null {
    const s = this.ownersKey(op.key, op.owner);
    if (!s) return got === 'lost' ? null : 'a completion by an owner that is not the current one was stored';
    if (got === 'lost') {
      if (!this.mayBeGone(s)) return "the current owner's completion was refused (LeaseLostError)";
      this.keys.delete(op.key);
      return null;
    }
    this.keys.set(op.key, { fingerprint: s.fingerprint, status: 'completed', lease: 'ended', retention: clockOf(op.owner.retentionMs), response: op.response });
    return null;
  }

  private renew(op: Extract<Op, { kind: 'renew' }>, token: string | null): string | null {
    const s = this.ownersKey(op.key, op.owner);
    if (!s) return token === null ? null : 'a renewal by an owner that is not the current one succeeded';
    if (token === null) {
      if (!this.mayBeGone(s)) return "the current owner's renewal was refused";
      this.keys.delete(op.key);
      return null;
    }
    if (BigInt(token) <= BigInt(op.owner.token)) return 'a renewed token is not above the one it replaces';
    this.keys.set(op.key, { ...s, token, lease: later(s.lease, clockOf(op.leaseMs)) });
    this.owners.set(op.key, [...(this.owners.get(op.key) ?? []), { ...op.owner, token }]);
    return null;
  }

  private release(op: Extract<Op, { kind: 'release' }>): string | null {
    if (this.ownersKey(op.key, op.owner)) this.keys.delete(op.key);
    return null;
  }

  private outcome(op: Extract<Op, { kind: 'outcome' }>, o: KeyOutcome): string | null {
    const s = this.keys.get(op.key);
    const allowed: ((o: KeyOutcome) => boolean)[] = [];
    if (!s) allowed.push((x) => x.state === 'unknown');
    else {
      for (const leaseEnded of s.status === 'in_progress' ? cases(s.lease) : [true]) {
        for (const retentionEnded of cases(s.retention)) {
          if (this.replaceable(s, leaseEnded, retentionEnded)) allowed.push((x) => x.state === 'unknown');
          else if (s.status === 'completed') allowed.push((x) => x.state === 'completed' && x.status === s.response?.status);
          else allowed.push((x) => x.state === 'in_progress' && (leaseEnded ? x.retryAfterMs === 0 : x.retryAfterMs > 0));
        }
      }
    }
    if (allowed.some((ok) => ok(o))) return null;
    return `outcome ${JSON.stringify(o)} does not fit the key ${JSON.stringify(s ?? 'absent')}`;
  }
}

/** A response as compared: an absent Location and an undefined one are the same. */
function normal(r: StoredResponse | undefined): unknown {
  return r && { status: r.status, body: r.body, contentType: r.contentType, location: r.location ?? undefined };
}

export function describeOp(op: Op): string {
  switch (op.kind) {
    case 'claim':
      return `claim(fp ${op.fingerprint}, lease ${op.leaseMs} ms, retention ${op.retentionMs} ms)`;
    case 'complete':
      return `complete(token ${op.owner.token}, status ${op.response.status})`;
    case 'renew':
      return `renew(token ${op.owner.token}, lease ${op.leaseMs} ms)`;
    case 'release':
      return `release(token ${op.owner.token})`;
    case 'outcome':
      return 'outcome()';
  }
}

function describeObserved(o: Observed): string {
  if ('error' in o) return o.error;
  const r = o.result as Partial<Extract<ClaimResult, { kind: 'claimed' }>> | null | undefined;
  if (r && typeof r === 'object' && r.kind === 'claimed') return `claimed${r.takenOver ? ' (takeover)' : ''} token ${r.owner?.token}`;
  if (r && typeof r === 'object' && 'response' in r) return `completed ${(r as { response: StoredResponse }).response.status}`;
  return JSON.stringify(o.result ?? 'ok');
}
