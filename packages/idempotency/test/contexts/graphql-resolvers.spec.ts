import { randomUUID } from 'node:crypto';
import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { Args, Field, Int, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import { MercuriusDriver, MercuriusDriverConfig } from '@nestjs/mercurius';
import { GraphQLModule } from '@nestjs/graphql';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource } from 'typeorm';
import { IDEMPOTENT_OUTCOME, IdempotencyErrorCode, IdempotencyKeys, IdempotencyModule, Idempotent, IdempotentOutcome, OutcomeResponse, transactionalClsModule } from 'safe-retries';
import { CONTEXT_ERROR_CODES } from 'safe-retries/graphql';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { createDatabase } from '../support/test-services';
import { waitFor } from '../support/wait-for';

/**
 * @Idempotent() on a GraphQL resolver in an app of its own (Mercurius on
 * Fastify, no app code of this repository): the key from an argument, the
 * scope from the module's `scope` on the HTTP request, problems as GraphQL
 * errors even under an app filter that catches everything.
 */

@ObjectType()
class Credit {
  @Field()
  entry!: string;

  @Field(() => Int)
  amount!: number;
}

/** A declined card: a business outcome, stored and replayed (IDEMPOTENT_OUTCOME). */
class Declined extends Error implements IdempotentOutcome {
  [IDEMPOTENT_OUTCOME](): OutcomeResponse {
    return { status: 402, body: '{"code":"card_declined"}', contentType: 'application/json' };
  }
}

/** An error of the resolver's own, not the module's. */
const boom = new Error('boom');

/** Holds `held` until the test lets it go. */
let letGo: () => void = () => undefined;

@Resolver()
class CreditsResolver {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @Query(() => String)
  ping(): string {
    return 'pong';
  }

  @Mutation(() => Credit)
  @Idempotent({ key: { arg: 'idempotencyKey' } })
  async credit(@Args('idempotencyKey', { nullable: true }) _key: string, @Args('amount', { type: () => Int }) amount: number): Promise<Credit> {
    const [row] = (await this.txHost.tx.query('INSERT INTO credits (amount) VALUES ($1) RETURNING entry::text', [amount])) as { entry: string }[];
    return { entry: row.entry, amount };
  }

  @Mutation(() => Credit, { nullable: true })
  @Idempotent({ key: { arg: 'idempotencyKey' }, required: false })
  async creditMaybe(@Args('idempotencyKey', { nullable: true }) _key: string, @Args('amount', { type: () => Int }) amount: number): Promise<Credit> {
    return this.credit(_key, amount);
  }

  @Mutation(() => Credit)
  @Idempotent({ key: { header: 'Idempotency-Key' } })
  byHeader(@Args('amount', { type: () => Int }) amount: number): Promise<Credit> {
    return this.credit('', amount);
  }

  @Mutation(() => Credit)
  @Idempotent({ key: (args) => `order-${(args as { n: number }).n}` })
  byFunction(@Args('n', { type: () => Int }) n: number): Promise<Credit> {
    return this.credit('', n);
  }

  @Mutation(() => Credit)
  @Idempotent({ key: { field: 'id' } })
  byField(@Args('id') _id: string): Promise<Credit> {
    return this.credit('', 1);
  }

  @Mutation(() => Credit)
  @Idempotent({ key: { arg: 'idempotencyKey' } })
  async held(@Args('idempotencyKey') key: string, @Args('amount', { type: () => Int }) amount: number): Promise<Credit> {
    await new Promise<void>((resolve) => (letGo = resolve));
    return this.credit(key, amount);
  }

  @Mutation(() => Credit)
  @Idempotent({ key: { arg: 'idempotencyKey' } })
  decline(@Args('idempotencyKey') _key: string): Promise<Credit> {
    return Promise.reject(new Declined('card declined'));
  }

  @Mutation(() => Credit)
  @Idempotent({ key: { arg: 'idempotencyKey' } })
  fail(@Args('idempotencyKey') _key: string): Promise<Credit> {
    return Promise.reject(boom);
  }
}

/** An app filter that answers every error its own way (each one it caught kept in `caught`): the module's errors must not reach it. */
@Catch()
class SwallowEverything implements ExceptionFilter {
  static readonly caught: unknown[] = [];
  catch(exception: unknown, _host: ArgumentsHost): { swallowed: true } {
    SwallowEverything.caught.push(exception);
    return { swallowed: true };
  }
}

type Answer = { data?: Record<string, { entry: string; amount: number } | null> | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };

describe('@Idempotent() on a GraphQL resolver (Mercurius)', () => {
  let app: NestFastifyApplication;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const db = await createDatabase();
    drop = db.drop;
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, migrations: idempotencyMigrations(), migrationsRun: true, extra: { max: 20 } }),
        transactionalClsModule({ middleware: false }),
        IdempotencyModule.forRoot({
          purge: { enabled: false },
          recovery: { enabled: false },
          scope: (req) => req.headers['x-tenant'] as string | undefined,
        }),
        GraphQLModule.forRoot<MercuriusDriverConfig>({ driver: MercuriusDriver, autoSchemaFile: true }),
      ],
      providers: [CreditsResolver],
    }).compile();
    app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter());
    app.useGlobalFilters(new SwallowEverything());
    app.useLogger(false);
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    await app.get(DataSource).query('CREATE TABLE credits (entry bigserial PRIMARY KEY, amount int NOT NULL)');
  });
  afterAll(async () => {
    await app.close();
    await drop();
  });

  async function mutate(query: string, tenant = 'tenant-a', headers: Record<string, string> = {}): Promise<{ answer: Answer; replayed?: string }> {
    const res = await app.inject({ method: 'POST', url: '/graphql', headers: { 'content-type': 'application/json', 'x-tenant': tenant, ...headers }, payload: { query } });
    return { answer: res.json<Answer>(), replayed: res.headers['idempotent-replayed'] as string | undefined };
  }

  const credits = async (): Promise<number> => Number(((await app.get(DataSource).query('SELECT count(*)::int AS n FROM credits')) as { n: number }[])[0].n);

  /** The state of tenant-a's key. */
  const stateOf = async (key: string): Promise<string> => (await app.get(IdempotencyKeys).outcome('tenant-a', key)).state;

  it('reads the header of the HTTP request (any case of the name), an argument, or a function', async () => {
    expect((await mutate('mutation { byHeader(amount: 1) { entry } }', 'tenant-a', { 'idempotency-key': 'k-1' })).answer.errors).toBeUndefined();
    expect(await stateOf('k-1')).toBe('completed');
    expect((await mutate('mutation { credit(idempotencyKey: "k-2", amount: 1) { entry } }')).answer.errors).toBeUndefined();
    expect(await stateOf('k-2')).toBe('completed');
    // A null argument is no key: the field requires one.
    const none = await mutate('mutation { credit(idempotencyKey: null, amount: 1) { entry } }');
    expect(none.answer.errors?.[0].extensions?.code).toBe('IDEMPOTENCY_KEY_MISSING');
    expect((await mutate('mutation { byFunction(n: 7) { entry } }')).answer.errors).toBeUndefined();
    expect(await stateOf('order-7')).toBe('completed');
  });

  it("refuses a payload field, which names a message key (the app's filter gets why)", async () => {
    SwallowEverything.caught.length = 0;
    await mutate('mutation { byField(id: "x") { entry } }');
    expect(SwallowEverything.caught).toHaveLength(1);
    expect((SwallowEverything.caught[0] as Error).message).toMatch(/use \{ arg \} or \{ header \}/);
  });

  it('reads the key from an argument: a retry replays the same credit, another tenant is another credit', async () => {
    const key = randomUUID();
    const first = await mutate(`mutation { credit(idempotencyKey: "${key}", amount: 7) { entry amount } }`);
    expect(first.answer.errors).toBeUndefined();
    const before = await credits();
    const retry = await mutate(`mutation { credit(amount: 7, idempotencyKey: "${key}") { entry } }`);
    expect(retry.replayed).toBe('true');
    expect(retry.answer.data).toEqual({ credit: { entry: first.answer.data!.credit!.entry } });
    expect(await credits()).toBe(before);
    const other = await mutate(`mutation { credit(idempotencyKey: "${key}", amount: 7) { entry } }`, 'tenant-b');
    expect(other.answer.data!.credit!.entry).not.toBe(first.answer.data!.credit!.entry);
  });

  it('answers its problems as GraphQL errors whatever the app filter: REUSED, MISSING, INVALID', async () => {
    const key = randomUUID();
    await mutate(`mutation { credit(idempotencyKey: "${key}", amount: 1) { entry } }`);
    const reused = await mutate(`mutation { credit(idempotencyKey: "${key}", amount: 2) { entry } }`);
    expect(reused.answer.errors?.[0].extensions?.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const missing = await mutate('mutation { credit(amount: 2) { entry } }');
    expect(missing.answer.errors?.[0].extensions?.code).toBe('IDEMPOTENCY_KEY_MISSING');
    const invalid = await mutate(`mutation { credit(idempotencyKey: "${'k'.repeat(256)}", amount: 2) { entry } }`);
    expect(invalid.answer.errors?.[0].extensions?.code).toBe('IDEMPOTENCY_KEY_INVALID');
  });

  it('gives every problem of the module a code, IDEMPOTENCY_KEY_IN_USE with its retryAfter', async () => {
    expect(Object.keys(CONTEXT_ERROR_CODES).sort()).toEqual(Object.values(IdempotencyErrorCode).sort());
    const key = randomUUID();
    const first = mutate(`mutation { held(idempotencyKey: "${key}", amount: 4) { entry } }`);
    await waitFor('the first mutation in progress', async () => (await app.get(IdempotencyKeys).outcome('tenant-a', key)).state === 'in_progress');
    const inUse = await mutate(`mutation { held(idempotencyKey: "${key}", amount: 4) { entry } }`);
    letGo();
    expect((await first).answer.errors).toBeUndefined();
    expect(inUse.answer.errors?.[0].extensions).toEqual({ code: 'IDEMPOTENCY_KEY_IN_USE', retryAfter: 1 });
  });

  it('answers a replayed business outcome with its stored status and body', async () => {
    const key = randomUUID();
    await mutate(`mutation { decline(idempotencyKey: "${key}") { entry } }`);
    const replay = await mutate(`mutation { decline(idempotencyKey: "${key}") { entry } }`);
    expect(replay.answer.errors?.[0].extensions).toEqual({ code: 'IDEMPOTENT_OUTCOME', outcome: { status: 402, body: { code: 'card_declined' } } });
  });

  it("leaves any other error as it is (the app's filter gets it), and answers the module's as GraphQL errors", async () => {
    SwallowEverything.caught.length = 0;
    await mutate(`mutation { fail(idempotencyKey: "${randomUUID()}") { entry } }`);
    expect(SwallowEverything.caught).toHaveLength(1);
    expect(SwallowEverything.caught[0]).toBe(boom);
    const missing = await mutate('mutation { credit(amount: 2) { entry } }');
    expect(missing.answer.errors?.[0].extensions?.code).toBe('IDEMPOTENCY_KEY_MISSING');
    expect(SwallowEverything.caught).toHaveLength(1);
  });

  it('runs a field with `required: false` and no key as a plain resolver', async () => {
    const before = await credits();
    await mutate('mutation { creditMaybe(amount: 3) { entry } }');
    await mutate('mutation { creditMaybe(amount: 3) { entry } }');
    expect(await credits()).toBe(before + 2);
  });

  it('50 identical mutations at once: one credit; every answer it or IDEMPOTENCY_KEY_IN_USE', async () => {
    const key = randomUUID();
    const before = await credits();
    const answers = await Promise.all(Array.from({ length: 50 }, () => mutate(`mutation { credit(idempotencyKey: "${key}", amount: 9) { entry } }`)));
    expect(await credits()).toBe(before + 1);
    const entries = new Set(answers.flatMap(({ answer }) => (answer.data?.credit ? [answer.data.credit.entry] : [])));
    expect(entries.size).toBe(1);
    // The whole error when it is another: what went wrong, not only that it did.
    for (const { answer } of answers) if (!answer.data?.credit) expect(answer.errors?.[0]).toMatchObject({ extensions: { code: 'IDEMPOTENCY_KEY_IN_USE' } });
  });
});
