import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { IdempotencyStore, StoredResponse } from 'safe-retries/testing';
import { keyId } from '../support/keys-table';
import { Observed, Op, SHORT_MS, StoreModel } from './store-model';

/**
 * The commands of the model-based test: batches of one to three operations run
 * at once (a batch of one is a sequential step), ticks that let short leases
 * and retentions end, and the purge. A batch passes when its answers fit some
 * order of its operations run one at a time on the model (its operations are
 * each atomic in the store, so any concurrent run must be one of those orders),
 * except that a claim raced by a write of its key may answer "retry" (see
 * StoreModel.claim).
 */
export interface RealStore {
  store: IdempotencyStore;
  /** A fresh scope per run: runs never share keys. */
  scope: string;
  inContext<T>(work: () => Promise<T>): Promise<T>;
  /** Deletes what the store may forget (the PostgreSQL store's purge); absent: nothing to run. */
  purge?(): Promise<void>;
}

type Cmd = fc.AsyncCommand<StoreModel, RealStore>;

const KEYS = ['k0', 'k1', 'k2'];
const FINGERPRINTS = ['a', 'b'];
const LONG_LEASE_MS = 60_000;
const LONG_RETENTION_MS = 3_600_000;
/** Lease and retention of a claim: both long, a short lease, or both short (the lease is never the longer). */
const TIMINGS = [
  { leaseMs: LONG_LEASE_MS, retentionMs: LONG_RETENTION_MS },
  { leaseMs: 1, retentionMs: LONG_RETENTION_MS },
  { leaseMs: 1, retentionMs: SHORT_MS },
];
/** Longer than a short lease or retention on any clock, so each ends within a tick. */
const TICK_MS = 25;

interface OpSpec {
  kind: Op['kind'];
  key: number;
  fingerprint: number;
  timing: number;
  /** Which of the key's owners acts (current or stale), modulo their count. */
  owner: number;
  status: number;
  shortRenewal: boolean;
}

const opSpec: fc.Arbitrary<OpSpec> = fc.record({
  kind: fc.constantFrom<Op['kind']>('claim', 'claim', 'complete', 'renew', 'release', 'outcome'),
  key: fc.nat(KEYS.length - 1),
  fingerprint: fc.nat(FINGERPRINTS.length - 1),
  timing: fc.nat(TIMINGS.length - 1),
  owner: fc.nat(7),
  status: fc.constantFrom(200, 201, 402),
  shortRenewal: fc.boolean(),
});

/** The operation a spec stands for, with the owner it names now; one needing an owner the key never had reads the outcome. */
function toOp(spec: OpSpec, model: StoreModel, batch: number): Op {
  const key = KEYS[spec.key];
  if (spec.kind === 'claim') return { kind: 'claim', key, fingerprint: FINGERPRINTS[spec.fingerprint], ...TIMINGS[spec.timing] };
  const owners = model.owners.get(key) ?? [];
  if (spec.kind === 'outcome' || owners.length === 0) return { kind: 'outcome', key };
  const owner = owners[spec.owner % owners.length];
  if (spec.kind === 'renew') return { kind: 'renew', key, owner, leaseMs: spec.shortRenewal ? 1 : LONG_LEASE_MS };
  if (spec.kind === 'release') return { kind: 'release', key, owner };
  const response: StoredResponse = { status: spec.status, body: JSON.stringify({ batch, key }), contentType: 'application/json', location: `/things/${batch}` };
  return { kind: 'complete', key, owner, response };
}

async function execute(op: Op, real: RealStore): Promise<Observed> {
  const { store, scope } = real;
  try {
    switch (op.kind) {
      case 'claim':
        return { result: await store.claim({ scope, key: op.key, id: keyId(scope, op.key), fingerprint: createHash('sha256').update(op.fingerprint).digest().subarray(0, 16), leaseMs: op.leaseMs, retentionMs: op.retentionMs }) };
      case 'complete':
        return { result: await real.inContext(() => store.runUnit(() => store.complete(op.owner, op.response))) };
      case 'renew':
        return { result: await store.renew(op.owner, op.leaseMs) };
      case 'release':
        return { result: await store.release(op.owner) };
      case 'outcome':
        return { result: await store.outcome({ scope, key: op.key, id: keyId(scope, op.key) }) };
    }
  } catch (error) {
    return { error: (error as Error).name === 'LeaseLostError' ? 'LeaseLostError' : `${(error as Error).name}: ${(error as Error).message}` };
  }
}

let batches = 0;

class BatchCommand implements Cmd {
  constructor(readonly specs: OpSpec[]) {}

  check(): boolean {
    return true;
  }

  async run(model: StoreModel, real: RealStore): Promise<void> {
    const batch = ++batches;
    const ops = this.specs.map((spec) => toOp(spec, model, batch));
    const observed = await Promise.all(ops.map((op) => execute(op, real)));
    const raced = ops.map((op, i) => ops.some((other, j) => j !== i && other.key === op.key && other.kind !== 'outcome'));
    let first: StoreModel | undefined;
    for (const order of orders(ops.length)) {
      const trial = model.clone();
      const failed = order.some((i) => trial.apply(ops[i], observed[i], raced[i]) !== null);
      if (!failed) return model.adopt(trial);
      first ??= trial;
    }
    const keys = [...new Set(ops.map((op) => op.key))];
    const histories = keys.map((k) => `key ${k}:\n    ${(first?.history.get(k) ?? []).join('\n    ')}`).join('\n  ');
    const together = ops.length > 1 ? ` (run at once; no order of them fits: shown in the order given)` : '';
    throw new Error(`the store broke the contract${together}:\n  ${histories}`);
  }

  toString(): string {
    return `batch[${this.specs.map((s) => `${s.kind} ${KEYS[s.key]}`).join(', ')}]`;
  }
}

class TickCommand implements Cmd {
  check(): boolean {
    return true;
  }

  async run(model: StoreModel): Promise<void> {
    await sleep(TICK_MS);
    model.tick();
  }

  toString(): string {
    return 'tick';
  }
}

class PurgeCommand implements Cmd {
  check(): boolean {
    return true;
  }

  async run(model: StoreModel, real: RealStore): Promise<void> {
    await sleep(TICK_MS);
    model.tick();
    // What the purge may delete is what the model already allows to be gone.
    await real.purge?.();
  }

  toString(): string {
    return 'purge';
  }
}

/** Every order of 0..n-1 (n is at most 3). */
function orders(n: number): number[][] {
  if (n <= 1) return [[...Array(n).keys()]];
  return orders(n - 1).flatMap((rest) => Array.from({ length: n }, (_, at) => [...rest.slice(0, at), n - 1, ...rest.slice(at)]));
}

/** The commands a run draws from; `concurrent: false` runs one operation at a time. */
export function storeCommands({ concurrent = true } = {}): fc.Arbitrary<Cmd>[] {
  const single = fc.array(opSpec, { minLength: 1, maxLength: 1 }).map((specs): Cmd => new BatchCommand(specs));
  const together = fc.array(opSpec, { minLength: 2, maxLength: 3 }).map((specs): Cmd => new BatchCommand(specs));
  return [single, single, ...(concurrent ? [together] : []), fc.constant(new TickCommand()), fc.constant(new PurgeCommand())];
}
