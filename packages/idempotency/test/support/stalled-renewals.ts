import type { IdempotencyStore, Ownership } from 'safe-retries/testing';

/**
 * A worker whose lease renewals never reach the store: the in-process stand-in
 * for an owner that is paused (a GC pause, a frozen VM) or cut off from the
 * database while its handler runs. A live owner renews its lease every third
 * of it (LeaseKeeper), so only such an owner can lose it to a retry; the
 * suites that prove fencing (a stale owner can never commit, its release
 * leaves the newer claim) make one this way. Renewals of the keys named by
 * `stall` fail as a dropped connection would; every other statement, and
 * every other key's renewals, reach the real store (and are counted).
 * The app's test/e2e/fault/slow-worker.spec.ts shows the same with a real process frozen by SIGSTOP.
 */
export class StalledRenewals {
  private readonly keys = new Set<string>();
  /** Owners met while their key was stalled: they stay stalled after `resume`. */
  private readonly stalled = new WeakSet<Ownership>();
  /** Renewals that kept a lease (the store answered a new token), by key. */
  private readonly kept = new Map<string, number>();

  constructor(store: IdempotencyStore) {
    const renew = store.renew.bind(store);
    store.renew = async (owner: Ownership, leaseMs: number) => {
      if (this.keys.has(owner.key)) this.stalled.add(owner);
      if (this.stalled.has(owner)) throw new Error('the renewal never reached the store (a stalled worker)');
      const token = await renew(owner, leaseMs);
      if (token !== null) this.kept.set(owner.key, this.renewals(owner.key) + 1);
      return token;
    };
  }

  /** How many renewals of `key`'s owners kept their lease. */
  renewals(key: string): number {
    return this.kept.get(key) ?? 0;
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
