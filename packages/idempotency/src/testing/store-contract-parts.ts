import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { RecoveryPoint, RecoveryPoints } from '../idempotency.store';
import type { StoreContractCase } from './store-contract';
import { ContractDriver } from './store-contract-subject';

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
        assert.equal(await recovery.takeOverOperation(request.scope, request.key, leaseMs), null, 'taken over while its lease holds');
        await d.unit(() => recovery.checkpoint(owner, point(request.key)));
        await d.store.release(owner);
      }
      const byKey = await recovery.takeOverOperation(a.scope, a.key, leaseMs);
      assert.deepEqual(byKey?.recovery, point(a.key));
      assert.equal(byKey?.owner.key, a.key);
      assert.equal(await recovery.takeOverOperation(a.scope, a.key, leaseMs), null, 'taken over twice');
      const abandoned = await recovery.takeOverAbandoned(10_000, leaseMs);
      const mine = abandoned.filter((t) => t.owner.key === a.key || t.owner.key === b.key);
      assert.deepEqual(
        mine.map((t) => [t.owner.scope, t.owner.key, t.owner.retentionMs, t.recovery]),
        [[b.scope, b.key, b.retentionMs, point(b.key)]],
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
      const waiting = settlement.awaitSettled(request.scope, request.key, timeoutMs);
      await sleep(50);
      await settlement.announceSettled(request.scope, request.key);
      await waiting.settled;
      assert.ok(Date.now() - started < timeoutMs / 2, `woken after ${Date.now() - started} ms`);
      const cancelled = settlement.awaitSettled(request.scope, request.key, timeoutMs);
      const at = Date.now();
      cancelled.cancel();
      await cancelled.settled;
      assert.ok(Date.now() - at < 1_000);
    },
  },
];
