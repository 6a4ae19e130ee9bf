import { randomUUID } from 'node:crypto';
import { toPaymentResponse } from '../src/payments/model/payment-response';
import { JSON_TYPE, PAYMENT_BODY, StoreHarness } from './lib/app';
import { round } from './lib/stats';
import type { ClaimRequest, StoredResponse } from '../packages/idempotency/src/contract/idempotency.store';

/**
 * §4 Storage: `keys` completed keys (UUIDv4) whose stored response has the
 * reference's shape {"id":…,"amount":…,"currency":"usd"}, written through the
 * real store (claim, then the fenced completion in a transaction) by
 * `concurrency` workers. Bytes per key = pg_total_relation_size (heap, TOAST
 * and both indexes) / count, right after the load and after a VACUUM.
 * With `shape: 'payment'` the stored body is what POST /payments answers (the
 * app's toPaymentResponse), to say what that shape costs.
 */
export type BodyShape = 'reference' | 'payment';

function responseBody(shape: BodyShape, amount: number): string {
  if (shape === 'reference') return JSON.stringify({ id: randomUUID(), amount, currency: 'usd' });
  return JSON.stringify(
    toPaymentResponse({
      id: randomUUID(),
      order_id: null,
      status: 'succeeded',
      amount: String(amount),
      currency: 'usd',
      description: null,
      failure_code: null,
      amount_refunded: '0',
      payment_method: 'pm_card_visa',
      network_charge_id: `pi_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
      idempotency_key: null,
      created_at: new Date(),
    }),
  );
}
export interface Size {
  rows: number;
  totalBytes: number;
  heapBytes: number;
  indexBytes: number;
  bytesPerKey: number;
  deadTuples: number;
}

export interface StorageResult {
  shape: BodyShape;
  /** Mean length of the stored bodies, bytes. */
  bodyBytes: number;
  keys: number;
  concurrency: number;
  loadSeconds: number;
  keysPerSecond: number;
  hotUpdates: number;
  withoutVacuum: Size;
  afterVacuum: Size;
  /** Informational: VACUUM FULL rewrites the table and indexes compactly (a lower bound). */
  afterVacuumFull: Size;
}

async function size(h: StoreHarness): Promise<Size> {
  const [r] = await h.dataSource.query<Record<string, string>[]>(`
    SELECT (SELECT count(*) FROM idempotency_keys) AS rows,
           pg_total_relation_size('idempotency_keys') AS total,
           pg_relation_size('idempotency_keys') AS heap,
           pg_indexes_size('idempotency_keys') AS idx,
           (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'idempotency_keys') AS dead`);
  const rows = Number(r.rows);
  const totalBytes = Number(r.total);
  return {
    rows,
    totalBytes,
    heapBytes: Number(r.heap),
    indexBytes: Number(r.idx),
    bytesPerKey: round(totalBytes / rows, 1),
    deadTuples: Number(r.dead ?? 0),
  };
}

/**
 * How each key is written: `durable`, the claim (a row in progress) and then the
 * fenced completion (an UPDATE of that row); `one`, the one-commit claim and the
 * key's single INSERT with its response, in one transaction.
 */
export type StorageCommit = 'durable' | 'one';

export async function storage(
  h: StoreHarness,
  keys: number,
  concurrency: number,
  shape: BodyShape = 'reference',
  commit: StorageCommit = 'durable',
): Promise<StorageResult & { commit: StorageCommit }> {
  await h.dataSource.query('TRUNCATE idempotency_keys');
  let issued = 0;
  let bodyBytes = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (issued < keys) {
        issued++;
        const amount = 100 + Math.floor(Math.random() * 99_900);
        const request = h.request(randomUUID(), { ...PAYMENT_BODY, amount });
        const body = responseBody(shape, amount);
        bodyBytes += Buffer.byteLength(body);
        const response = { status: 201, body, contentType: JSON_TYPE };
        if (commit === 'one') {
          await writeInOneCommit(h, request, response);
          continue;
        }
        const claim = await h.store.claim(request);
        if (claim.kind !== 'claimed') throw new Error(`storage: expected a claim, got ${claim.kind}`);
        await h.complete(claim.owner, response);
      }
    }),
  );
  const loadSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  // Statistics are sent asynchronously by the backends: give them a moment.
  await h.dataSource.query('SELECT pg_stat_force_next_flush()').catch(() => undefined);
  await new Promise((r) => setTimeout(r, 1_000));
  const withoutVacuum = await size(h);
  const [{ hot }] = await h.dataSource.query<{ hot: string }[]>(
    `SELECT n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE relname = 'idempotency_keys'`,
  );
  await h.dataSource.query('VACUUM (ANALYZE) idempotency_keys');
  const afterVacuum = await size(h);
  await h.dataSource.query('VACUUM FULL idempotency_keys');
  const afterVacuumFull = await size(h);
  return {
    shape,
    commit,
    bodyBytes: round(bodyBytes / keys, 1),
    keys,
    concurrency,
    loadSeconds: round(loadSeconds, 2),
    keysPerSecond: round(keys / loadSeconds, 0),
    hotUpdates: Number(hot),
    withoutVacuum,
    afterVacuum,
    afterVacuumFull,
  };
}

/** A key as a one-commit route writes it: claimed and inserted with its response in one transaction. */
async function writeInOneCommit(h: StoreHarness, request: ClaimRequest, response: StoredResponse): Promise<void> {
  const { oneCommit } = h.store;
  if (!oneCommit) throw new Error('storage: the store has no one-commit claims');
  await h.cls.run(() =>
    h.store.runUnit(async () => {
      const claim = await oneCommit.claim(request);
      if (claim.kind !== 'claimed') throw new Error(`storage: expected a claim, got ${claim.kind}`);
      await oneCommit.complete(request, response);
    }),
  );
}
