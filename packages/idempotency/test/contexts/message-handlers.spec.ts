import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { randomUUID } from 'node:crypto';
import type { AddressInfo, Server } from 'node:net';
import { ArgumentsHost, Catch, Controller, INestMicroservice, Type } from '@nestjs/common';
import { BaseRpcExceptionFilter, ClientProxy, ClientProxyFactory, EventPattern, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Propagation, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { lastValueFrom } from 'rxjs';
import { DataSource } from 'typeorm';
import { IdempotencyKeys, IdempotencyModule, Idempotent, IdempotentOptions, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { IDEMPOTENCY_EVENTS_CHANNEL, IdempotencyEvent } from 'safe-retries/telemetry';
import { IDEMPOTENCY_POSTGRES_STORE, idempotencyStoreOf } from 'safe-retries/testing';
import { keyId } from '../support/keys-table';
import { NaiveIdempotencyStore } from '../support/naive-idempotency.store';
import { createDatabase } from '../support/test-services';

type CommitMode = NonNullable<IdempotentOptions['commit']>;

/**
 * @Idempotent() on microservice handlers over Nest's TCP transport (a real
 * socket, no broker), against PostgreSQL in both commit modes: identical
 * messages at once write one row and get one reply; a duplicate event has one effect. The same race
 * against the naive check-then-insert store writes two rows. An event has no
 * reply: what became of each is read from the module's outcomes (its
 * diagnostics channel), one per event, failures included.
 */

interface Credit {
  id?: string;
  account: string;
  amount: number;
}

/** An error of the handler's own, not the module's. */
const boom = new Error('boom');

/** The app's filter of every error, as Nest answers them (each one it caught kept in `caught`). */
@Catch()
class RecordingFilter extends BaseRpcExceptionFilter {
  static readonly caught: unknown[] = [];
  override catch(exception: unknown, host: ArgumentsHost) {
    RecordingFilter.caught.push(exception);
    return super.catch(exception, host);
  }
}

@Controller()
class LedgerController {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @MessagePattern('ledger.credit')
  @Idempotent({ key: { field: 'id' } })
  async credit(@Payload() credit: Credit): Promise<{ entry: string; account: string; amount: number }> {
    const [row] = (await this.txHost.tx.query('INSERT INTO ledger_entries (message_id, account, amount) VALUES ($1, $2, $3) RETURNING entry_id::text', [
      credit.id ?? null,
      credit.account,
      credit.amount,
    ])) as { entry_id: string }[];
    return { entry: row.entry_id, account: credit.account, amount: credit.amount };
  }

  @MessagePattern('ledger.keyed')
  @Idempotent({ key: { field: 'id' } })
  keyed(): Promise<{ done: true }> {
    return Promise.resolve({ done: true });
  }

  @MessagePattern('ledger.ref')
  @Idempotent({ key: (data) => (data as { ref: string }).ref })
  ref(): Promise<{ done: true }> {
    return Promise.resolve({ done: true });
  }

  @MessagePattern('ledger.arg')
  @Idempotent({ key: { arg: 'id' } })
  arg(): Promise<{ done: true }> {
    return Promise.resolve({ done: true });
  }

  @MessagePattern('ledger.fail')
  @Idempotent({ key: { field: 'id' } })
  fail(@Payload() _credit: Credit): Promise<never> {
    return Promise.reject(boom);
  }

  @EventPattern('ledger.noted')
  @Idempotent({ key: { field: 'id' } })
  async noted(@Payload() credit: Credit): Promise<void> {
    await this.txHost.tx.query('INSERT INTO ledger_entries (message_id, account, amount) VALUES ($1, $2, $3)', [credit.id, credit.account, credit.amount]);
  }
}

interface Ledger {
  app: INestMicroservice;
  client: ClientProxy;
  dataSource: DataSource;
  close(): Promise<void>;
}

async function startLedger(store?: Type, commit: CommitMode = 'durable'): Promise<Ledger> {
  const db = await createDatabase();
  let builder = Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ type: 'postgres', url: db.url, migrations: idempotencyMigrations(), migrationsRun: true, extra: { max: 20 } }),
      transactionalClsModule({ middleware: false }),
      IdempotencyModule.forRoot({ commit, purge: { enabled: false }, recovery: { enabled: false }, replayCache: { enabled: false } }),
    ],
    controllers: [LedgerController],
  });
  if (store) builder = builder.overrideProvider(IDEMPOTENCY_POSTGRES_STORE).useClass(store);
  const moduleRef = await builder.compile();
  const app = moduleRef.createNestMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port: 0 } });
  app.useLogger(false);
  app.useGlobalFilters(new RecordingFilter());
  await app.listen();
  const dataSource = app.get(DataSource);
  await dataSource.query('CREATE TABLE ledger_entries (entry_id bigserial PRIMARY KEY, message_id text, account text NOT NULL, amount int NOT NULL)');
  const { port } = app.unwrap<Server>().address() as AddressInfo;
  const client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
  await client.connect();
  return {
    app,
    client,
    dataSource,
    close: async () => {
      await client.close();
      await app.close();
      await db.drop();
    },
  };
}

/** A reply, or the error the sender received. */
type Reply = { ok: true; value: unknown } | { ok: false; error: { status?: string; code?: string; retryAfter?: number } };

function send(ledger: Ledger, pattern: string, data: unknown): Promise<Reply> {
  return lastValueFrom(ledger.client.send(pattern, data)).then(
    (value: unknown) => ({ ok: true, value }),
    (error: (Reply & { ok: false })['error']) => ({ ok: false, error }),
  );
}

async function entries(ledger: Ledger, id: string): Promise<number> {
  const [row] = (await ledger.dataSource.query('SELECT count(*)::int AS n FROM ledger_entries WHERE message_id = $1', [id])) as { n: number }[];
  return row.n;
}

/**
 * Polls until `check` holds (a condition awaited, not a fixed wait). The
 * deadline is only a guard, so that a condition that never comes fails the
 * test rather than hanging it: 60 s, far past what these conditions take on a
 * loaded machine (well under a second). A timeout says what `seen` last saw.
 */
async function until(what: string, check: () => Promise<boolean> | boolean, seen: () => unknown): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`no ${what} within 60 s; saw ${JSON.stringify(await seen())}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** An outcome that answers a request: each request has exactly one (the others end a claimed one). */
const ANSWERS: readonly string[] = ['claimed', 'taken_over', 'replayed', 'in_progress', 'mismatch', 'failed'];

interface Outcomes {
  /** Every outcome told, in order ("name" or "name: the error's message"). */
  all: string[];
  /** The outcomes that answer a request (ANSWERS), by name. */
  answers(): string[];
  stop(): void;
}

/** The module's outcomes for one key, as told on its diagnostics channel, from now on. */
function outcomesOf(scope: string, key: string): Outcomes {
  const id = keyId(scope, key);
  const all: string[] = [];
  const names: string[] = [];
  const listener = (message: unknown) => {
    const event = message as IdempotencyEvent;
    if (event.keyId !== id) return;
    names.push(event.name);
    all.push(event.error === undefined ? event.name : `${event.name}: ${(event.error as Error).message}`);
  };
  subscribe(IDEMPOTENCY_EVENTS_CHANNEL, listener);
  return { all, answers: () => names.filter((n) => ANSWERS.includes(n)), stop: () => unsubscribe(IDEMPOTENCY_EVENTS_CHANNEL, listener) };
}

function emitNoted(ledger: Ledger, credit: Credit): Promise<unknown> {
  return lastValueFrom(ledger.client.emit('ledger.noted', credit), { defaultValue: undefined });
}

describe('@Idempotent() on message handlers over TCP', () => {
  jest.setTimeout(120_000);

  // The module's default commit mode: the durable claim, or the claim inside the handler's transaction.
  describe.each<CommitMode>(['durable', 'one'])('with the PostgreSQL store, commit %s', (commit) => {
    let ledger: Ledger;
    beforeAll(async () => {
      ledger = await startLedger(undefined, commit);
    });
    afterAll(() => ledger.close());

    it('100 identical @MessagePattern messages at once: one row, every reply the same or IDEMPOTENCY_KEY_IN_USE', async () => {
      const id = randomUUID();
      const replies = await Promise.all(Array.from({ length: 100 }, () => send(ledger, 'ledger.credit', { id, account: 'acct_1', amount: 250 })));
      expect(await entries(ledger, id)).toBe(1);
      const values = replies.flatMap((r) => (r.ok ? [r.value] : []));
      expect(values.length).toBeGreaterThanOrEqual(1);
      for (const value of values) expect(value).toEqual(values[0]);
      expect(values[0]).toMatchObject({ account: 'acct_1', amount: 250 });
      for (const r of replies) if (!r.ok) expect(r.error).toMatchObject({ status: 'error', code: 'IDEMPOTENCY_KEY_IN_USE', retryAfter: 1 });
      console.log(`messages: ${values.length} replies, ${replies.length - values.length} IDEMPOTENCY_KEY_IN_USE, 1 row`);

      // A retry once it has settled: the stored reply.
      const retry = await send(ledger, 'ledger.credit', { id, account: 'acct_1', amount: 250 });
      expect(retry).toEqual({ ok: true, value: values[0] });
    });

    it('refuses the key reused with another payload (IDEMPOTENCY_KEY_REUSED) and a message without a key (IDEMPOTENCY_KEY_MISSING)', async () => {
      const id = randomUUID();
      expect((await send(ledger, 'ledger.credit', { id, account: 'acct_2', amount: 100 })).ok).toBe(true);
      const reused = await send(ledger, 'ledger.credit', { id, account: 'acct_2', amount: 999 });
      expect(reused).toMatchObject({ ok: false, error: { status: 'error', code: 'IDEMPOTENCY_KEY_REUSED' } });
      expect((reused as Reply & { ok: false }).error).not.toHaveProperty('retryAfter');
      const missing = await send(ledger, 'ledger.credit', { account: 'acct_2', amount: 100 });
      expect(missing).toMatchObject({ ok: false, error: { status: 'error', code: 'IDEMPOTENCY_KEY_MISSING' } });
      expect(await entries(ledger, id)).toBe(1);
    });

    it('reads a payload field (a string or a number), else none', async () => {
      const stateOf = async (key: string) => (await ledger.app.get(IdempotencyKeys).outcome('message:ledger.keyed', key)).state;
      expect(await send(ledger, 'ledger.keyed', { id: 'evt_1' })).toEqual({ ok: true, value: { done: true } });
      expect(await stateOf('evt_1')).toBe('completed');
      expect(await send(ledger, 'ledger.keyed', { id: 42 })).toEqual({ ok: true, value: { done: true } });
      expect(await stateOf('42')).toBe('completed');
      // No key: the handler requires one.
      expect(await send(ledger, 'ledger.keyed', { id: { nested: true } })).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_KEY_MISSING' } });
      expect(await send(ledger, 'ledger.keyed', 'a string payload')).toMatchObject({ ok: false, error: { code: 'IDEMPOTENCY_KEY_MISSING' } });
    });

    it("asks a function, and refuses a GraphQL argument (the app's filter gets why)", async () => {
      expect(await send(ledger, 'ledger.ref', { ref: 'x' })).toEqual({ ok: true, value: { done: true } });
      expect((await ledger.app.get(IdempotencyKeys).outcome('message:ledger.ref', 'x')).state).toBe('completed');
      RecordingFilter.caught.length = 0;
      expect((await send(ledger, 'ledger.arg', {})).ok).toBe(false);
      expect(RecordingFilter.caught).toHaveLength(1);
      expect((RecordingFilter.caught[0] as Error).message).toMatch(/use \{ field \} or \{ header \}/);
    });

    it("leaves any other error as it is: the app's filter gets it, the sender Nest's answer to it", async () => {
      RecordingFilter.caught.length = 0;
      const failed = await send(ledger, 'ledger.fail', { id: randomUUID(), account: 'acct_3', amount: 1 });
      expect(RecordingFilter.caught).toHaveLength(1);
      expect(RecordingFilter.caught[0]).toBe(boom);
      expect(failed).toEqual({ ok: false, error: { status: 'error', message: 'Internal server error' } });
    });

    it('a duplicate @EventPattern event is acknowledged and skipped: one effect', async () => {
      const id = randomUUID();
      const outcomes = outcomesOf('message:ledger.noted', id);
      try {
        await emitNoted(ledger, { id, account: 'acct_3', amount: 70 });
        await until('first event processed', async () => (await entries(ledger, id)) === 1 && outcomes.answers().length === 1, () => outcomes.all);
        expect(outcomes.all).toEqual(['claimed']);
        // The completion commits with the row: once the row is visible, the key is completed.
        for (let i = 0; i < 5; i++) await emitNoted(ledger, { id, account: 'acct_3', amount: 70 });
        await until('answer to each of the five duplicates', () => outcomes.answers().length >= 6, () => outcomes.all);
        expect(outcomes.all).toEqual(['claimed', 'replayed', 'replayed', 'replayed', 'replayed', 'replayed']);
        expect(await entries(ledger, id)).toBe(1);
      } finally {
        outcomes.stop();
      }
    });

    it('30 identical events at once: one effect, the rest skipped or refused while it runs', async () => {
      const id = randomUUID();
      const outcomes = outcomesOf('message:ledger.noted', id);
      try {
        await Promise.all(Array.from({ length: 30 }, () => emitNoted(ledger, { id, account: 'acct_4', amount: 5 })));
        // Each event answers once: 30 answers, whatever they are, then what they are.
        await until('answer to each of the 30 events', () => outcomes.answers().length >= 30, () => outcomes.all);
        await until('claimed event committed', async () => (await entries(ledger, id)) === 1, () => outcomes.all);
        const answers = outcomes.answers();
        expect(answers).toHaveLength(30);
        expect(answers.filter((n) => n === 'claimed')).toHaveLength(1);
        expect(outcomes.all.filter((n) => n !== 'claimed' && n !== 'replayed' && n !== 'in_progress')).toEqual([]);
        expect(await entries(ledger, id)).toBe(1);
      } finally {
        outcomes.stop();
      }
    });

    it('an event whose claim fails (the store\'s error) is answered: failed, with the error', async () => {
      const id = randomUUID();
      const outcomes = outcomesOf('message:ledger.noted', id);
      await ledger.dataSource.query('ALTER TABLE idempotency_keys RENAME TO idempotency_keys_away');
      try {
        await emitNoted(ledger, { id, account: 'acct_6', amount: 9 });
        await until('answer to the event', () => outcomes.answers().length >= 1, () => outcomes.all);
      } finally {
        await ledger.dataSource.query('ALTER TABLE idempotency_keys_away RENAME TO idempotency_keys');
        outcomes.stop();
      }
      expect(outcomes.all).toEqual(['failed: relation "idempotency_keys" does not exist']);
      expect(await entries(ledger, id)).toBe(0);
    });
  });

  describe('with the PostgreSQL store, commit one: a unit whose insert of the key finds it committed by another', () => {
    let ledger: Ledger;
    beforeAll(async () => {
      ledger = await startLedger(undefined, 'one');
    });
    afterAll(() => ledger.close());

    /**
     * The next one-commit insert meets the key committed, with the same
     * response, by another unit in between: as when this unit's claim read the
     * key just before a concurrent unit committed it, then took the lock that
     * unit had let go (the claim's snapshot predates its lock).
     */
    function committedByAnotherBeforeTheNextInsert(): jest.SpyInstance {
      const oneCommit = idempotencyStoreOf(ledger.app).store.oneCommit!;
      const txHost = ledger.app.get<TransactionHost<TransactionalAdapterTypeOrm>>(TransactionHost);
      const insert = oneCommit.complete.bind(oneCommit);
      return jest.spyOn(oneCommit, 'complete').mockImplementationOnce(async (request, response) => {
        await txHost.withTransaction(Propagation.RequiresNew, () => insert(request, response));
        await insert(request, response);
      });
    }

    it('the event rolls back (its effect with it) and is answered once, as the replay it is', async () => {
      const id = randomUUID();
      const outcomes = outcomesOf('message:ledger.noted', id);
      const spy = committedByAnotherBeforeTheNextInsert();
      try {
        await emitNoted(ledger, { id, account: 'acct_7', amount: 3 });
        await until('answer to the event', () => outcomes.answers().length >= 1, () => outcomes.all);
        // Anything told after its answer would be a second outcome of one event.
        await emitNoted(ledger, { id, account: 'acct_7', amount: 3 });
        await until('answer to its retry', () => outcomes.answers().length >= 2, () => outcomes.all);
        expect(outcomes.all).toEqual(['replayed', 'replayed']);
        expect(await entries(ledger, id)).toBe(0);
      } finally {
        spy.mockRestore();
        outcomes.stop();
      }
    });
  });

  describe('with the naive check-then-insert store (the race has teeth)', () => {
    let ledger: Ledger;
    beforeAll(async () => {
      ledger = await startLedger(NaiveIdempotencyStore);
    });
    afterAll(() => ledger.close());

    it('100 identical messages at once write more than one row', async () => {
      (idempotencyStoreOf(ledger.app).store as NaiveIdempotencyStore).holdClaimWindow(2);
      const id = randomUUID();
      await Promise.all(Array.from({ length: 100 }, () => send(ledger, 'ledger.credit', { id, account: 'acct_5', amount: 1 })));
      expect(await entries(ledger, id)).toBeGreaterThanOrEqual(2);
    });
  });
});
