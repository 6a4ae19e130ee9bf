import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Ownership, RecoveryPoint, RecoveryPoints } from '../contract/idempotency.store';
import { ContractDriver, StoreContractCase } from './store-contract-subject';

/** The cases of the contract's optional parts: recovery points, and waking waiting duplicates. */

function recoveryOf(d: ContractDriver): RecoveryPoints {
  const { recovery } = d.store;
  assert.ok(recovery, 'the store has no recovery points');
  return recovery;
}

const point = (name: string): RecoveryPoint => ({ operation: 'contract.operation', point: name, state: { step: name }, status: 201 });

export const recoveryCases: StoreContractCase[] = [
  {
    name: 'recovery points: a checkpoint commits with its unit and comes back with the key to the attempt that takes it over',
    needs: 'recovery',
    async run(d) {
      const recovery = recoveryOf(d);
      const request = d.request({ leaseMs: d.settings.shortLeaseMs });
      const { owner } = await d.claimed(request);
      await d.unit(() => recovery.checkpoint(owner, point('started')));
      const taken = await d.takeOver(request);
      assert.deepEqual(taken.recovery, point('started'));
    },
  },
  {
    name: 'recovery points: a checkpoint in a unit that fails is rolled back with it',
    needs: 'recovery',
    async run(d) {
      const recovery = recoveryOf(d);
      const request = d.request({ leaseMs: d.settings.shortLeaseMs });
      const { owner } = await d.claimed(request);
      await assert.rejects(
        d.unit(async () => {
          await recovery.checkpoint(owner, point('never'));
          throw new Error('the phase failed');
        }),
        /the phase failed/,
      );
      const taken = await d.takeOver(request);
      assert.equal(taken.recovery, null);
    },
  },
  {
    name: 'recovery points: fenced; a stale owner can neither checkpoint nor discard',
    needs: 'recovery',
    async run(d) {
      const recovery = recoveryOf(d);
      const request = d.request({ leaseMs: d.settings.shortLeaseMs });
      const { owner: stale } = await d.claimed(request);
      await d.takeOver(request);
      await d.leaseLost(
        d.unit(() => recovery.checkpoint(stale, point('stale'))),
        'the stale owner checkpoints',
      );
      await d.leaseLost(
        d.unit(() => recovery.discard(stale)),
        'the stale owner discards',
      );
    },
  },
  {
    name: 'recovery points: release keeps a key at its recovery point, lease ended: the next claim resumes it at once',
    needs: 'recovery',
    async run(d) {
      const recovery = recoveryOf(d);
      const request = d.request({ leaseMs: 60_000 });
      const { owner } = await d.claimed(request);
      await d.unit(() => recovery.checkpoint(owner, point('intent')));
      await d.store.release(owner);
      const resumed = await d.claimed(request, true);
      assert.deepEqual(resumed.recovery, point('intent'));
    },
  },
  {
    name: 'recovery points: discard deletes the key with its point, in the unit: the next claim is fresh',
    needs: 'recovery',
    async run(d) {
      const recovery = recoveryOf(d);
      const request = d.request();
      const { owner } = await d.claimed(request);
      await d.unit(() => recovery.checkpoint(owner, point('started')));
      await d.unit(() => recovery.discard(owner));
      const fresh = await d.claimed(request);
      assert.equal(fresh.recovery, null);
    },
  },
  {
    name: 'recovery points: an abandoned operation is taken over by its key or by the recovery job, once, with its point',
    needs: 'recovery',
    async run(d) {
      const recovery = recoveryOf(d);
      const leaseMs = 60_000;
      const [a, b] = [d.request({ leaseMs }), d.request({ leaseMs })];
      for (const request of [a, b]) {
        const { owner } = await d.claimed(request);
        assert.equal(await recovery.takeOver(leaseMs, request), null, 'taken over while its lease holds');
        await d.unit(() => recovery.checkpoint(owner, point(request.key)));
        await d.store.release(owner);
      }
      const byKey = await recovery.takeOver(leaseMs, a);
      assert.deepEqual(byKey?.recovery, point(a.key));
      assert.deepEqual([byKey?.owner.key, byKey?.owner.id], [a.key, a.id]);
      assert.equal(await recovery.takeOver(leaseMs, a), null, 'taken over twice');
      // The recovery job's takeovers, one at a time until none is left (earlier cases may have left some).
      const abandoned: { owner: Ownership; recovery: RecoveryPoint }[] = [];
      for (let next = await recovery.takeOver(leaseMs); next; next = await recovery.takeOver(leaseMs)) {
        abandoned.push(next);
        assert.ok(abandoned.length <= 10_000, 'the same operations are taken over again and again');
      }
      const mine = abandoned.filter((t) => t.owner.key === a.key || t.owner.key === b.key);
      assert.deepEqual(
        mine.map((t) => [t.owner.scope, t.owner.key, t.owner.id, t.owner.retentionMs, t.recovery]),
        [[b.scope, b.key, b.id, b.retentionMs, point(b.key)]],
      );
      await d.complete(mine[0].owner, d.response());
    },
  },
];

export const settlementCases: StoreContractCase[] = [
  {
    name: 'waiting: a waiter is woken once its key is announced settled, and at once when it cancels',
    needs: 'settlement',
    async run(d) {
      const { settlement } = d.store;
      assert.ok(settlement, 'the store cannot wake waiting duplicates');
      const request = d.request();
      const timeoutMs = 20_000;
      const started = Date.now();
      const waiting = settlement.awaitSettled(request, timeoutMs);
      await sleep(50);
      await settlement.announceSettled(request);
      await waiting.settled;
      assert.ok(Date.now() - started < timeoutMs / 2, `woken after ${Date.now() - started} ms`);
      const cancelled = settlement.awaitSettled(request, timeoutMs);
      const at = Date.now();
      cancelled.cancel();
      await cancelled.settled;
      assert.ok(Date.now() - at < 1_000);
    },
  },
];

/** The cases of claims held by a unit (`oneCommit`), beside the core's cases that run in both modes. */
export const oneCommitCases: StoreContractCase[] = [
  {
    name: 'one commit: a unit that ends without committing (a crash, a rollback) frees its key at once, not after its lease',
    modes: ['one'],
    async run(d) {
      const request = d.request({ leaseMs: 60_000 });
      const { owner } = await d.claimed(request);
      await d.release(owner);
      const again = await d.claimed(request);
      await d.complete(again.owner, d.response());
      assert.equal((await d.claim(request)).kind, 'completed');
    },
  },
  {
    name: 'one commit: an owner paused past its lease has its unit ended by the store; the next claim wins at once and commits; the paused one cannot',
    modes: ['one'],
    async run(d) {
      const request = d.request({ leaseMs: d.settings.shortLeaseMs });
      const { owner: paused } = await d.claimed(request);
      const deadline = Date.now() + 10 * d.settings.shortLeaseMs + 5_000;
      let next = await d.claim(request);
      while (next.kind === 'in_progress' && Date.now() < deadline) {
        await sleep(Math.max(5, Math.floor(d.settings.shortLeaseMs / 10)));
        next = await d.claim(request);
      }
      assert.equal(next.kind, 'claimed', `the key of an owner paused past its ${request.leaseMs} ms lease is claimed again, not ${next.kind}`);
      if (next.kind !== 'claimed') return;
      assert.equal(next.takenOver, false, 'nothing of the paused owner is left to take over');
      await d.complete(next.owner, d.response('next'));
      await assert.rejects(d.complete(paused, d.response('paused')), 'the paused owner commits');
      const replay = await d.claim(request);
      assert.equal(replay.kind === 'completed' && replay.response.body, 'next');
    },
  },
  {
    name: 'one commit: a completed key past its retention is new again: the next unit claims it and its insert replaces the row',
    modes: ['one'],
    async run(d) {
      // The lease bounds the unit's transaction: it must outlast a claim and a completion on a busy host.
      const request = d.request({ leaseMs: 2_000, retentionMs: 2_500 });
      const { owner } = await d.claimed(request);
      await d.complete(owner, d.response('first'));
      const deadline = Date.now() + 10_000;
      while ((await d.store.outcome(request)).state !== 'unknown') {
        assert.ok(Date.now() < deadline, 'the key is forgotten once its retention has run out');
        await sleep(10);
      }
      const again = await d.claimed(request);
      await d.complete(again.owner, d.response('second'));
      const replay = await d.claim(request);
      assert.equal(replay.kind === 'completed' && replay.response.body, 'second');
    },
  },
  {
    name: 'one commit: claims that meet a unit as it commits its key are told it is in progress or replay it, never claim it again',
    modes: ['one'],
    async run(d) {
      // The window is a claim whose read predates the unit's commit and whose lock follows it:
      // many claims, back to back, each round meeting one commit.
      const ROUNDS = 60;
      const CLAIMERS = 8;
      for (let round = 0; round < ROUNDS; round++) {
        const request = d.request();
        const { owner } = await d.claimed(request);
        let committed = false;
        const again: string[] = [];
        const claimer = async () => {
          for (let settled = false; !settled; ) {
            const claim = await d.claim(request);
            if (claim.kind === 'claimed') {
              again.push(claim.takenOver ? 'taken over' : 'claimed');
              await d.release(claim.owner);
            }
            settled = committed && claim.kind === 'completed';
          }
        };
        const claimers = Array.from({ length: CLAIMERS }, claimer);
        await sleep(1);
        await d.complete(owner, d.response('first'));
        committed = true;
        await Promise.all(claimers);
        assert.deepEqual(again, [], `round ${round + 1}: a key being committed was claimed again`);
      }
    },
  },
  {
    name: 'one commit: the key is written once: a unit that believes it free after another committed it stores nothing (LeaseLostError)',
    modes: ['one'],
    async run(d) {
      const request = d.request();
      const { owner } = await d.claimed(request);
      await d.complete(owner, d.response('first'));
      // As a unit that did not see the first unit's row (a durable claim of the same key) would.
      await d.leaseLost(d.unit(() => d.oneCommit.complete(request, d.response('second'))), 'a second insert of the key');
      const replay = await d.claim(request);
      assert.equal(replay.kind === 'completed' && replay.response.body, 'first');
    },
  },
  {
    name: 'one commit: a unit whose claim found the key free stores nothing when a durable claim took the key meanwhile (LeaseLostError)',
    modes: ['one'],
    async run(d) {
      const request = d.request();
      const { owner } = await d.claimed(request);
      const durable = await d.store.claim(request);
      assert.equal(durable.kind, 'claimed', 'a durable claim of a key with no row takes it');
      if (durable.kind !== 'claimed') return;
      await d.leaseLost(d.complete(owner, d.response('one commit')), "the unit's write of the key");
      await d.unit(() => d.store.complete(durable.owner, d.response('durable')));
      const replay = await d.store.claim(request);
      assert.equal(replay.kind === 'completed' && replay.response.body, 'durable');
    },
  },
];
