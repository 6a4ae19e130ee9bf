import { setTimeout as sleep } from 'node:timers/promises';
import { Ownership } from 'safe-retries/testing';
import { LeaseKeeper } from '../../src/core/lease-keeper';

/**
 * A recovery point sent with its phase's COMMIT (a pipelined client) is
 * answered after its statement has resolved: no renewal may start before the
 * phase's transaction has ended, or it could change the token the recovery
 * point matches on before the server has run it.
 */
describe('LeaseKeeper.fenced', () => {
  const owner = (): Ownership => ({ scope: 's', key: 'k', id: 'id', token: '1', retentionMs: 60_000 });
  const counted = () => {
    const store = { renewals: 0, renew: async () => String(++store.renewals + 1) };
    return store;
  };

  it('starts no renewal until `until` has settled, then renews again', async () => {
    const store = counted();
    const lease = new LeaseKeeper(owner(), store, 30);
    let end!: () => void;
    const unitEnded = new Promise<void>((resolve) => (end = resolve));
    try {
      await lease.fenced(async () => undefined, unitEnded);
      await sleep(60);
      expect(store.renewals).toBe(0);
      end();
      await sleep(60);
      expect(store.renewals).toBeGreaterThan(0);
    } finally {
      await lease.stop();
    }
  });

  it('without `until`, renews once the statement has resolved', async () => {
    const store = counted();
    const lease = new LeaseKeeper(owner(), store, 30);
    try {
      await lease.fenced(async () => undefined);
      await sleep(60);
      expect(store.renewals).toBeGreaterThan(0);
    } finally {
      await lease.stop();
    }
  });
});
