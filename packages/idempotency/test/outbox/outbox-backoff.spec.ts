import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { INestApplication } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource } from 'typeorm';
import { Outbox } from 'safe-retries/outbox';
import { moduleApp } from '../support/module-app';

/**
 * The outbox's retry schedule, as the relay writes it: full jitter under a
 * doubling ceiling, capped; and the schedule docs/outbox.md publishes is the
 * one the relay runs. A running relay and a publisher that refuses each
 * message once; a trigger of the test's records every failed delivery's wait
 * (next_attempt_at less the statement's now(), exact to the millisecond). A
 * message is added with its earlier failures counted (attempts, set in the
 * adding transaction), so its next failure is the n-th; the jitter's random
 * draw (Math.random) is the test's, as jest.spyOn gives it.
 */
describe('the outbox retry schedule (PostgreSQL, the relay running)', () => {
  let app: INestApplication;
  let close: () => Promise<void>;
  let dataSource: DataSource;
  /** The messages the publisher refuses the next time it is handed them. */
  const refuse = new Set<string>();

  beforeAll(async () => {
    ({ app, close } = await moduleApp({
      scope: () => 'tenant',
      outbox: {
        publish: async (message) => {
          if (refuse.delete(message.id)) throw new Error(`refused ${message.id}`);
        },
      },
    }));
    dataSource = app.get(DataSource);
    await dataSource.query(`
      CREATE TABLE failures (id uuid NOT NULL, attempts int NOT NULL, wait_ms numeric NOT NULL);
      CREATE FUNCTION record_failure() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO failures VALUES (NEW.id, NEW.attempts, extract(epoch FROM NEW.next_attempt_at - now()) * 1000);
        RETURN NULL;
      END $$;
      CREATE TRIGGER record_failure AFTER UPDATE OF last_error ON idempotency_outbox
        FOR EACH ROW WHEN (NEW.last_error IS NOT NULL AND NEW.delivered_at IS NULL) EXECUTE FUNCTION record_failure();`);
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await close?.();
  });

  /**
   * The wait the relay writes after the n-th failure of a message, for each n
   * of `failures`, while Math.random answers `draw`.
   */
  async function waitsAfter(failures: number[], draw: number): Promise<number[]> {
    const random = jest.spyOn(Math, 'random').mockReturnValue(draw);
    try {
      const txHost = app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
      const ids = await txHost.withTransaction(async () => {
        const added = await app.get(Outbox).add(failures.map((n) => ({ topic: 'schedule', payload: { n } })));
        // Its n-1 earlier failures: the relay's claim counts the n-th attempt.
        await txHost.tx.query('UPDATE idempotency_outbox m SET attempts = f.n - 1 FROM unnest($1::uuid[], $2::int[]) AS f (id, n) WHERE m.id = f.id', [added, failures]);
        for (const id of added) refuse.add(id);
        return added;
      });
      const deadline = performance.now() + 10_000;
      for (;;) {
        const rows = (await dataSource.query('SELECT id::text, attempts, wait_ms::float8 AS wait FROM failures WHERE id = ANY($1::uuid[])', [ids])) as { id: string; attempts: number; wait: number }[];
        if (rows.length === ids.length) {
          const byId = new Map(rows.map((r) => [r.id, r]));
          return ids.map((id, i) => {
            expect(byId.get(id)!.attempts).toBe(failures[i]);
            return byId.get(id)!.wait;
          });
        }
        if (performance.now() > deadline) throw new Error(`${ids.length - rows.length} of ${ids.length} failures unrecorded after 10 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      random.mockRestore();
    }
  }

  /** The longest wait after each failure of 1 to 13, 40 and 1,000: the wait when the draw is the highest. */
  let longest: Promise<Map<number, number>> | undefined;
  const ceilings = () =>
    (longest ??= (async () => {
      const failures = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 40, 1_000];
      const waits = await waitsAfter(failures, 0.999_999_999);
      return new Map(failures.map((n, i) => [n, waits[i]]));
    })());

  it('waits uniformly between 0 and a ceiling that doubles from 1 s up to 1 h', async () => {
    const ceiling = await ceilings();
    expect([1, 2, 3, 12, 13, 40, 1_000].map((n) => ceiling.get(n))).toEqual([1_000, 2_000, 4_000, 2_048_000, 3_600_000, 3_600_000, 3_600_000]);
    expect(await waitsAfter([5], 0)).toEqual([0]);
    expect(await waitsAfter([5], 0.5)).toEqual([8_000]);
  });

  it('is the schedule docs/outbox.md publishes', async () => {
    const ceiling = await ceilings();
    const page = readFileSync(resolve(__dirname, '../../docs/outbox.md'), 'utf8');
    const rows = [...page.matchAll(/^\| (\d+)(?: and later)? \| (\d+) \| (\d+|one hour more each) \|$/gm)];
    expect(rows.length).toBe(13);
    let latest = 0;
    for (const [, failure, within, at] of rows) {
      const seconds = ceiling.get(Number(failure))! / 1000;
      latest += seconds;
      expect(Number(within)).toBe(seconds);
      if (at !== 'one hour more each') expect(Number(at)).toBe(latest);
    }
  });
});
