import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClaimRequest, ClaimResult, IdempotencyStore, OneCommitKeys, Ownership, StoredResponse } from '../contract/idempotency.store';
import { keyId } from '../contract/key-id';

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

/**
 * How the cases claim and complete keys: `durable`, the store's own claim
 * (committed alone) and a completion in a unit; `one`, the store's `oneCommit`
 * claims, each held by a unit of its own until its completion (the unit's last
 * statement, then its commit) or its release (the unit's rollback).
 */
export type ContractCommitMode = 'durable' | 'one';

/** A key claimed by a unit that stays open until the case completes or releases it. */
interface HeldUnit {
  /** Ends the unit: with this response (stored, then committed), or null (rolled back). */
  end(response: StoredResponse | null): void;
  /** The unit's end: rejects when its completion or commit failed. */
  done: Promise<void>;
}

/** The rollback of a held unit that the case released. */
class Released extends Error {}

/** How the cases run: set by describeStoreContract's options. */
export interface StoreContractSettings {
  /** Identical claims at once in the race. */
  raceSize: number;
  /** The lease of the cases that wait for one to end, in ms. */
  shortLeaseMs: number;
}

/** Helpers the cases share: fresh requests, claims that must succeed, units, waits. */
export class ContractDriver {
  private readonly held = new Map<string, HeldUnit>();

  constructor(
    readonly subject: StoreContractSubject,
    readonly settings: StoreContractSettings,
    readonly mode: ContractCommitMode = 'durable',
  ) {}

  get store(): IdempotencyStore {
    return this.subject.store;
  }

  /** The store's one-commit claims (mode `one`). */
  get oneCommit(): OneCommitKeys {
    const { oneCommit } = this.store;
    assert.ok(oneCommit, 'the store has no one-commit claims');
    return oneCommit;
  }

  /** A claim in the driver's mode: in mode `one`, a claimed key stays held by its unit until complete or release. */
  claim(request: ClaimRequest): Promise<ClaimResult> {
    if (this.mode === 'durable') return this.store.claim(request);
    return new Promise<ClaimResult>((resolve, reject) => {
      let ended!: (response: StoredResponse | null) => void;
      const ending = new Promise<StoredResponse | null>((settle) => (ended = settle));
      const done = this.unit(async () => {
        const claim = await this.oneCommit.claim(request);
        if (claim.kind === 'claimed') this.held.set(request.id, { end: ended, done });
        resolve(claim);
        if (claim.kind !== 'claimed') return;
        const response = await ending;
        if (response === null) throw new Released();
        await this.oneCommit.complete(request, response);
      });
      done.catch((error: unknown) => {
        if (!(error instanceof Released)) reject(error instanceof Error ? error : new Error(String(error)));
      });
    });
  }

  /** Gives an owner's key up: the store's release, or (mode `one`) the rollback of its unit. */
  async release(owner: Ownership): Promise<void> {
    if (this.mode === 'durable') return this.store.release(owner);
    const held = this.held.get(owner.id);
    this.held.delete(owner.id);
    held?.end(null);
    await held?.done.catch((error: unknown) => {
      if (!(error instanceof Released)) throw error;
    });
  }

  /** Rolls back every unit still held (mode `one`): after the cases, or a case that failed. */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.held.values()].map((held) => (held.end(null), held.done.catch(() => undefined))));
    this.held.clear();
  }

  /** A claim request for a key no one has used, in a scope of its own; its id derived from its scope and key, as the orchestration does. */
  request(over: Partial<Omit<ClaimRequest, 'id'>> = {}): ClaimRequest {
    const request = { scope: `scope-${randomUUID()}`, key: randomUUID(), fingerprint: randomBytes(16), leaseMs: 30_000, retentionMs: 3_600_000, ...over };
    return { ...request, id: keyId(request.scope, request.key) };
  }

  /** A claim that must win the key. */
  async claimed(request: ClaimRequest, takenOver = false): Promise<Extract<ClaimResult, { kind: 'claimed' }>> {
    const claim = await this.claim(request);
    assert.equal(claim.kind, 'claimed', `expected the key to be claimed, got ${claim.kind}`);
    if (claim.kind !== 'claimed') throw new Error('unreachable');
    assert.equal(claim.takenOver, takenOver, takenOver ? 'expected a takeover' : 'expected a fresh claim, not a takeover');
    assert.deepEqual([claim.owner.scope, claim.owner.key, claim.owner.id], [request.scope, request.key, request.id], "the owner is the request's key");
    return claim;
  }

  /** Claims again until a claim takes the key over (its owner's lease ended), within `withinMs`. */
  async takeOver(request: ClaimRequest, withinMs = 10 * this.settings.shortLeaseMs + 5_000): Promise<Extract<ClaimResult, { kind: 'claimed' }>> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const claim = await this.store.claim(request);
      if (claim.kind === 'claimed') {
        assert.equal(claim.takenOver, true, 'a claim of a key in progress must be a takeover');
        assert.deepEqual([claim.owner.scope, claim.owner.key, claim.owner.id], [request.scope, request.key, request.id], "the owner is the request's key");
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

  /** The owner's completion in a unit of its own, as the orchestration runs it; in mode `one`, the end of its unit. */
  async complete(owner: Ownership, response: StoredResponse): Promise<void> {
    if (this.mode === 'durable') return this.unit(() => this.store.complete(owner, response));
    const held = this.held.get(owner.id);
    assert.ok(held, 'no unit holds this key');
    this.held.delete(owner.id);
    held.end(response);
    await held.done;
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

/**
 * One case of the store contract. `needs`: the optional part of the contract
 * it tests. `modes`: how it claims keys (ContractCommitMode): a case for both
 * runs once per mode the store has; default `durable` only.
 */
export interface StoreContractCase {
  name: string;
  needs?: 'recovery' | 'settlement';
  modes?: readonly ContractCommitMode[];
  run(driver: ContractDriver): Promise<void>;
}
