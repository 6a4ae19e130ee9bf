import type { IdempotencyStore, Ownership } from '../../packages/idempotency/src/idempotency.store';

/**
 * A worker whose lease renewals never reach the store: the in-process stand-in
 * for an owner that is paused (a GC pause, a frozen VM) or cut off from the
 * database while its handler runs. A live owner renews its lease every third
 * of it (LeaseKeeper), so only such an owner can lose it to a retry; the
 * suites that prove fencing (a stale owner can never commit, its release
 * leaves the newer claim) make one this way. Renewals of the keys named by
 * `stall` fail as a dropped connection would; every other statement, and
 * every other key's renewals, reach the real store. fault/slow-worker shows
 * the same with a real process frozen by SIGSTOP.
 */
export class StalledRenewals {
  private readonly keys = new Set<string>();
  /** Owners met while their key was stalled: they stay stalled after `resume`. */
  private readonly stalled = new WeakSet<Ownership>();

  constructor(store: IdempotencyStore) {
    const renew = store.renew.bind(store);
    store.renew = (owner: Ownership, leaseMs: number) => {
      if (this.keys.has(owner.key)) this.stalled.add(owner);
      return this.stalled.has(owner) ? Promise.reject(new Error('the renewal never reached the store (a stalled worker)')) : renew(owner, leaseMs);
    };
  }

  /** From now on, the owner of `key` cannot renew its lease. */
  stall(key: string): void {
    this.keys.add(key);
  }

  /** Later owners of `key` renew again (an attempt after the stalled one); an owner already stalled stays so. */
  resume(key: string): void {
    this.keys.delete(key);
  }
}
