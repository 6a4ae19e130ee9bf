import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { IdempotencyPurgeService } from 'safe-retries';
import { RedisIdempotencyStore } from 'safe-retries/redis';
import { StoreContractSubject } from 'safe-retries/testing';
import { NaiveIdempotencyStore } from '../support/naive-idempotency.store';
import { postgresStoreSubject } from '../support/store-apps';
import { hasRedis, redisUrl } from '../support/test-services';
import { RealStore, storeCommands } from './store-commands';
import { StoreModel } from './store-model';

/**
 * The store contract, checked by machine: fast-check draws sequences of
 * claims, completions, renewals, releases and outcome reads by several owners
 * of three keys (some run at once), ticks that end short leases and
 * retentions, and purges, and checks every answer against StoreModel. The
 * budget is MODEL_RUNS runs (default 25; `npm run test:model` runs 300). A
 * failure prints fast-check's seed, path and replayPath: MODEL_SEED=<seed>
 * MODEL_PATH=<path> MODEL_REPLAY=<replayPath> replays that run alone, shrunk.
 */
const settings: fc.Parameters<[unknown]> = {
  numRuns: Number(process.env.MODEL_RUNS ?? 25),
  ...(process.env.MODEL_SEED ? { seed: Number(process.env.MODEL_SEED), path: process.env.MODEL_PATH, endOnFailure: true } : {}),
};

function contractProperty(subject: () => StoreContractSubject & { purge?(): Promise<void> }, concurrent = true) {
  return fc.asyncProperty(fc.commands(storeCommands({ concurrent }), { maxCommands: 40, replayPath: process.env.MODEL_REPLAY }), async (commands) => {
    const { store, inContext, purge } = subject();
    const real: RealStore = { store, scope: `model-${randomUUID()}`, inContext: inContext ?? ((work) => work()), purge };
    await fc.asyncModelRun(() => ({ model: new StoreModel(), real }), commands);
  });
}

const RUN_TIMEOUT_MS = 300_000;

describe('the store contract, model-based', () => {
  describe.each([false, true])('PostgreSQL store, pipelined clients: %s', (pipeline) => {
    let subject: Awaited<ReturnType<typeof postgresStoreSubject>>;
    beforeAll(async () => {
      subject = await postgresStoreSubject({}, undefined, { pipeline });
    });
    afterAll(() => subject?.close?.());

    it('answers every step as the model of the contract allows', async () => {
      const purge = () => subject.app.get(IdempotencyPurgeService).purgeOnce().then(() => undefined);
      await fc.assert(contractProperty(() => ({ ...subject, purge })), settings);
    }, RUN_TIMEOUT_MS);
  });

  (hasRedis() ? describe : describe.skip)('Redis store', () => {
    let store: RedisIdempotencyStore;
    beforeAll(async () => {
      store = await RedisIdempotencyStore.create({ url: redisUrl(), keyPrefix: `model-${randomUUID()}:` });
    });
    afterAll(() => store?.onModuleDestroy());

    it('answers every step as the model of the contract allows', async () => {
      await fc.assert(contractProperty(() => ({ store })), settings);
    }, RUN_TIMEOUT_MS);
  });

  // The model has teeth: a store with no fence and no takeover is caught.
  describe('a naive check-then-insert store', () => {
    let subject: Awaited<ReturnType<typeof postgresStoreSubject>>;
    beforeAll(async () => {
      subject = await postgresStoreSubject({}, NaiveIdempotencyStore);
    });
    afterAll(() => subject?.close?.());

    it.each([
      ['with operations at once', true],
      ['one operation at a time', false],
    ])('is caught breaking the contract %s, with the key history that shows how', async (_, concurrent) => {
      const result = await fc.check(contractProperty(() => subject, concurrent), { numRuns: 200 });
      expect(result.failed).toBe(true);
      const message = String(result.errorInstance);
      expect(message).toMatch(/the store broke the contract[\s\S]*key k\d:/);
      // A broken rule of the contract (marked <--), not a crash of the test.
      expect(message).toMatch(/<-- (?!unexpected error)/);
    }, RUN_TIMEOUT_MS);
  });
});
