import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ContractCommitMode, StoreContractCase } from './store-contract-subject';
import { oneCommitCases, recoveryCases, settlementCases } from './store-contract-parts';

const BOTH: readonly ContractCommitMode[] = ['durable', 'one'];

/**
 * The contract every store keeps (see IdempotencyStore), case by case, on a
 * real store: nothing is mocked, races are real concurrent claims, leases end
 * on the store's own clock. Each case uses keys of its own.
 */
const coreCases: StoreContractCase[] = [
  {
    name: 'race: identical concurrent claims of a new key, exactly one wins and every other is told it is in progress',
    modes: BOTH,
    async run(d) {
      const request = d.request();
      const claims = await Promise.all(Array.from({ length: d.settings.raceSize }, () => d.claim(request)));
      const kinds = claims.map((c) => c.kind);
      assert.equal(kinds.filter((k) => k === 'claimed').length, 1, `one winner of ${claims.length} identical claims, got ${JSON.stringify(count(kinds))}`);
      assert.deepEqual(count(kinds), { claimed: 1, in_progress: claims.length - 1 });
      const winner = claims.find((c) => c.kind === 'claimed');
      assert.equal(winner?.kind === 'claimed' && winner.takenOver, false);
      if (winner?.kind === 'claimed') await d.complete(winner.owner, d.response());
    },
  },
  {
    name: 'replay: a completed key answers its response as stored: status, body bytes, content type, Location',
    modes: BOTH,
    async run(d) {
      for (const response of [d.response(), { status: 200, body: '', contentType: 'application/json; charset=utf-8' }]) {
        const request = d.request();
        const { owner } = await d.claimed(request);
        await d.complete(owner, response);
        const replay = await d.claim(request);
        assert.equal(replay.kind, 'completed');
        if (replay.kind !== 'completed') return;
        assert.deepEqual({ ...replay.response, location: replay.response.location ?? undefined }, { ...response, location: response.location });
        if (replay.retainedForMs !== undefined) assert.ok(replay.retainedForMs > 0 && replay.retainedForMs <= request.retentionMs);
      }
    },
  },
  {
    name: 'scope: the same key in another scope is another operation',
    modes: BOTH,
    async run(d) {
      const request = d.request();
      const { owner } = await d.claimed(request);
      const other = await d.claimed(d.request({ ...request, scope: `${request.scope}-other` }));
      await d.complete(owner, d.response());
      await d.release(other.owner);
    },
  },
  {
    name: 'mismatch: the key with another fingerprint is refused once completed, and while in progress (one commit: in progress, its key has no record yet)',
    modes: BOTH,
    async run(d) {
      const request = d.request();
      const other = { ...request, fingerprint: randomBytes(16) };
      const { owner } = await d.claimed(request);
      const whileRunning = await d.claim(other);
      if (d.mode === 'one') assert.equal(whileRunning.kind, 'in_progress');
      else assert.deepEqual(whileRunning, { kind: 'mismatch' });
      const response = d.response();
      await d.complete(owner, response);
      assert.deepEqual(await d.claim(other), { kind: 'mismatch' });
      assert.equal((await d.claim(request)).kind, 'completed');
    },
  },
  {
    name: 'in progress: while the lease holds, a duplicate is told what is left of it',
    modes: BOTH,
    async run(d) {
      const request = d.request({ leaseMs: 60_000 });
      const { owner } = await d.claimed(request);
      const duplicate = await d.claim(request);
      assert.equal(duplicate.kind, 'in_progress');
      if (duplicate.kind === 'in_progress') assert.ok(duplicate.retryAfterMs > 0 && duplicate.retryAfterMs <= 60_000, `retryAfterMs ${duplicate.retryAfterMs}`);
      await d.release(owner);
    },
  },
  {
    name: 'takeover: once the lease has ended, exactly one of several claims takes the key over, with a new token',
    async run(d) {
      const request = d.request({ leaseMs: d.settings.shortLeaseMs });
      const { owner } = await d.claimed(request);
      const first = await d.takeOver(request);
      assert.notEqual(first.owner.token, owner.token);
      await sleep(d.settings.shortLeaseMs * 2);
      const claims = await Promise.all(Array.from({ length: 10 }, () => d.store.claim(request)));
      assert.deepEqual(count(claims.map((c) => c.kind)), { claimed: 1, in_progress: 9 }, 'one winner of a takeover');
    },
  },
  {
    name: 'fencing: an owner whose key was taken over can neither complete, renew nor release it; the newer owner completes',
    async run(d) {
      const request = d.request({ leaseMs: d.settings.shortLeaseMs });
      const { owner: stale } = await d.claimed(request);
      const { owner: newer } = await d.takeOver(request);
      await d.leaseLost(d.complete(stale, d.response('stale')), 'the stale owner completes');
      assert.equal(await d.store.renew(stale, 60_000), null, 'the stale owner renews');
      await d.store.release(stale);
      const response = d.response('newer');
      await d.complete(newer, response);
      const replay = await d.store.claim(request);
      assert.equal(replay.kind === 'completed' && replay.response.body, 'newer');
    },
  },
  {
    name: 'renewal: a later lease and a new token, never a shorter lease; the old token fences nothing; a finished key is not renewed',
    async run(d) {
      const request = d.request({ leaseMs: d.settings.shortLeaseMs });
      const { owner } = await d.claimed(request);
      const first = { ...owner };
      const token = await d.store.renew(owner, 60_000);
      assert.ok(token !== null && token !== first.token, 'renewal gives a new token');
      const shorter = await d.store.renew({ ...owner, token: token! }, 1);
      assert.ok(shorter !== null && BigInt(shorter) > BigInt(token!), 'a renewal with a shorter lease gives a larger token');
      await sleep(d.settings.shortLeaseMs * 2);
      assert.equal((await d.store.claim(request)).kind, 'in_progress', 'the renewed lease holds past the first one, and past a shorter renewal');
      await d.leaseLost(d.complete(first, d.response()), 'the old token completes');
      assert.equal(await d.store.renew(first, 60_000), null, 'the old token renews');
      const renewed = { ...owner, token: shorter! };
      await d.complete(renewed, d.response());
      assert.equal(await d.store.renew(renewed, 60_000), null, 'a finished key is renewed');
    },
  },
  {
    name: 'release: an unfinished key is freed (the next claim is fresh); a completed one stays',
    modes: BOTH,
    async run(d) {
      const request = d.request();
      const { owner } = await d.claimed(request);
      await d.release(owner);
      const again = await d.claimed(request);
      await d.complete(again.owner, d.response());
      await d.release(again.owner);
      assert.equal((await d.claim(request)).kind, 'completed');
    },
  },
  {
    name: 'retention: counts from the completion: an operation that ran longer than its retention, renewing its lease, is replayed after it',
    async run(d) {
      const leaseMs = d.settings.shortLeaseMs;
      // A retention long enough that the claim right after the completion comes well within it, even on a busy host.
      const retentionMs = Math.max(leaseMs * 2, 1_000);
      const request = d.request({ leaseMs, retentionMs });
      const owner = { ...(await d.claimed(request)).owner };
      // The work runs past the retention, renewing its lease as the orchestration does.
      for (const until = Date.now() + retentionMs + leaseMs; Date.now() < until; await sleep(leaseMs / 4)) {
        const token = await d.store.renew(owner, leaseMs);
        assert.ok(token !== null, 'the owner renews its lease while it works');
        owner.token = token;
      }
      await d.complete(owner, d.response());
      assert.equal((await d.claim(request)).kind, 'completed', 'a key completed just now is replayed, whenever it was claimed');
    },
  },
  {
    name: 'outcome: unknown, in progress with what is left of the lease, completed with its status and end of retention; scoped',
    modes: BOTH,
    async run(d) {
      const request = d.request({ leaseMs: 60_000, retentionMs: 3_600_000 });
      assert.deepEqual(await d.store.outcome(request), { state: 'unknown' });
      const { owner } = await d.claimed(request);
      const running = await d.store.outcome(request);
      assert.ok(running.state === 'in_progress' && running.retryAfterMs > 0 && running.retryAfterMs <= 60_000, JSON.stringify(running));
      await d.complete(owner, d.response());
      const done = await d.store.outcome(request);
      assert.equal(done.state, 'completed');
      if (done.state !== 'completed') return;
      assert.equal(done.status, 201);
      // Retention counts from the completion (the store's clock; a minute's leeway for clocks apart).
      const left = Date.parse(done.expiresAt) - Date.now();
      assert.ok(Math.abs(left - 3_600_000) < 60_000, `expires ${done.expiresAt}, ${left} ms from now`);
      assert.deepEqual(await d.store.outcome(d.request({ ...request, scope: `${request.scope}-other` })), { state: 'unknown' });
    },
  },
  {
    name: 'unit: runs its work, answers its value and its error',
    async run(d) {
      assert.equal(await d.unit(async () => 42), 42);
      await assert.rejects(
        d.unit(async () => {
          throw new Error('inside a unit');
        }),
        /inside a unit/,
      );
      assert.equal(await d.inContext(async () => d.store.inUnit()), false, 'no unit is open outside one');
    },
  },
];

/** Every case, the core's first. */
export const STORE_CONTRACT: readonly StoreContractCase[] = [...coreCases, ...oneCommitCases, ...recoveryCases, ...settlementCases];

function count(kinds: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const k of kinds) counts[k] = (counts[k] ?? 0) + 1;
  return counts;
}
