import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClaimRequest, ClaimResult, IdempotencyStore, Ownership, StoredResponse } from '../idempotency.store';

/** A store under test, and what running it needs. */
export interface StoreContractSubject {
  store: IdempotencyStore;
  /**
   * Runs `work` where the store's units can open: the PostgreSQL store's need
   * nestjs-cls's context (`cls.run`, see idempotencyStoreOf). Default: as is.
   */
  inContext?<T>(work: () => Promise<T>): Promise<T>;
  /** Called once the cases have run (close the app, the connection). */
  close?(): Promise<void>;
}

/** How the cases run: set by describeStoreContract's options. */
export interface StoreContractSettings {
  /** Identical claims at once in the race. */
  raceSize: number;
  /** The lease of the cases that wait for one to end, in ms. */
  shortLeaseMs: number;
}

/** Helpers the cases share: fresh requests, claims that must succeed, units, waits. */
export class ContractDriver {
  constructor(
    readonly subject: StoreContractSubject,
    readonly settings: StoreContractSettings,
  ) {}

  get store(): IdempotencyStore {
    return this.subject.store;
  }

  /** A claim request for a key no one has used, in a scope of its own. */
  request(over: Partial<ClaimRequest> = {}): ClaimRequest {
    return { scope: `scope-${randomUUID()}`, key: randomUUID(), fingerprint: randomBytes(16), leaseMs: 30_000, retentionMs: 3_600_000, ...over };
  }

  /** A claim that must win the key. */
  async claimed(request: ClaimRequest, takenOver = false): Promise<Extract<ClaimResult, { kind: 'claimed' }>> {
    const claim = await this.store.claim(request);
    assert.equal(claim.kind, 'claimed', `expected the key to be claimed, got ${claim.kind}`);
    if (claim.kind !== 'claimed') throw new Error('unreachable');
    assert.equal(claim.takenOver, takenOver, takenOver ? 'expected a takeover' : 'expected a fresh claim, not a takeover');
    return claim;
  }

  /** Claims again until a claim takes the key over (its owner's lease ended), within `withinMs`. */
  async takeOver(request: ClaimRequest, withinMs = 10 * this.settings.shortLeaseMs + 5_000): Promise<Extract<ClaimResult, { kind: 'claimed' }>> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const claim = await this.store.claim(request);
      if (claim.kind === 'claimed') {
        assert.equal(claim.takenOver, true, 'a claim of a key in progress must be a takeover');
        return claim;
      }
      assert.equal(claim.kind, 'in_progress', `a key whose owner's lease is running out is in progress, not ${claim.kind}`);
      if (Date.now() > deadline) assert.fail(`no takeover within ${withinMs} ms of a ${request.leaseMs} ms lease`);
      await sleep(Math.max(5, Math.floor(this.settings.shortLeaseMs / 10)));
    }
  }

  /** `work` in the subject's context. */
  inContext<T>(work: () => Promise<T>): Promise<T> {
    return this.subject.inContext ? this.subject.inContext(work) : work();
  }

  /** `work` in one unit of the store, in the subject's context. */
  unit<T>(work: () => Promise<T>): Promise<T> {
    return this.inContext(() => this.store.runUnit(work));
  }

  /** The owner's completion in a unit of its own, as the orchestration runs it. */
  complete(owner: Ownership, response: StoredResponse): Promise<void> {
    return this.unit(() => this.store.complete(owner, response));
  }

  /** Rejects with LeaseLostError (the library's, or one of that name). */
  async leaseLost(action: Promise<unknown>, what: string): Promise<void> {
    await assert.rejects(action, (error: Error) => error?.name === 'LeaseLostError', `${what}: expected LeaseLostError`);
  }

  /** A response with every field a replay must give back. */
  response(body = JSON.stringify({ id: randomUUID(), note: 'zürich ✓' })): StoredResponse {
    return { status: 201, body, contentType: 'application/vnd.example+json; charset=utf-8', location: `/things/${randomUUID()}` };
  }
}
