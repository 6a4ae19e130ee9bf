import { Body, Controller, DynamicModule, INestApplication, Injectable, Module, OnModuleInit, Post, Req, Res, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { HttpResponse } from 'safe-retries';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { IdempotencyModule, IdempotencyModuleOptions, Idempotent, Operation, PhasedOperation } from 'safe-retries';
import { TestDatabase, createDatabase } from './test-services';

/**
 * The idempotency module as a library, in a Nest app that has nothing of this
 * service: no ProblemDetailsFilter (Nest's default exception filter), no auth,
 * no validation pipe. The principal is whatever the `X-Principal` header says,
 * any string, as `scope` returns it.
 */
export const PRINCIPAL_HEADER = 'x-principal';

/** A table name that only works escaped, created by the module's own migrations. */
export const LIBRARY_TABLE = 'Library Keys';

export type HeaderRequest = { headers: Record<string, string | string[] | undefined> };
/** The request's principal (the module's `scope`): its X-Principal header. */
export const principal = (req: HeaderRequest) => {
  const value = req.headers[PRINCIPAL_HEADER];
  return typeof value === 'string' ? value : undefined;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Holds the next execution of a name after its insert, until the test opens the gate: a paused owner. */
@Injectable()
export class WidgetGates {
  private readonly gates = new Map<string, { reached(): void; opened: Promise<void> }>();

  /** The next execution of `name` waits; `reached` resolves when it does, `open` lets it go on. */
  hold(name: string): { reached: Promise<void>; open(): void } {
    let reached!: () => void;
    let open!: () => void;
    const reachedP = new Promise<void>((resolve) => (reached = resolve));
    const opened = new Promise<void>((resolve) => (open = resolve));
    this.gates.set(name, { reached, opened });
    return { reached: reachedP, open };
  }

  async pass(name: string): Promise<void> {
    const gate = this.gates.get(name);
    if (!gate) return;
    this.gates.delete(name);
    gate.reached();
    await gate.opened;
  }
}

/** A token shown once: what the keys table keeps of it (its id), and how a replay shows it again (from the app's own table). */
@Injectable()
export class TokenReplays {
  constructor(private readonly dataSource: DataSource) {}

  store({ id, name }: { id: string; name: string }) {
    return { id, name };
  }

  async replay({ id, name }: { id: string; name: string }, req: HeaderRequest) {
    const [row] = await this.dataSource.query<{ token: string }[]>('SELECT token FROM lib_tokens WHERE id = $1 AND scope = $2', [id, principal(req)]);
    return { id, name, token: row.token };
  }
}

@Controller('lib')
class LibraryDemoController {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly gates: WidgetGates,
  ) {}

  /** The widget route in one commit: the claim inside its transaction, bounded by a 1 s lease. */
  @Post('widgets-one')
  @Idempotent({ commit: 'one', lease: '1s' })
  async createInOneCommit(@Req() req: HeaderRequest, @Body() body: { name: string; fail?: boolean }, @Res({ passthrough: true }) res: unknown) {
    const [row] = await this.txHost.tx.query<{ id: string }[]>('INSERT INTO lib_widgets (scope, name) VALUES ($1, $2) RETURNING id', [
      principal(req),
      body.name,
    ]);
    await this.gates.pass(body.name);
    if (body.fail) throw new Error('widgets-one: the handler failed after its insert');
    HttpResponse.of(res).setHeader('Location', `/lib/widgets/${row.id}`);
    return { id: row.id, name: body.name };
  }

  /** The same, where a duplicate waits for the first to settle instead of 409. */
  @Post('widgets-one-wait')
  @Idempotent({ commit: 'one', lease: '1s', wait: '5s' })
  createInOneCommitWaiting(@Req() req: HeaderRequest, @Body() body: { name: string; fail?: boolean }, @Res({ passthrough: true }) res: unknown) {
    return this.createInOneCommit(req, body, res);
  }

  @Post('widgets')
  @Idempotent()
  async create(@Req() req: HeaderRequest, @Body() body: { name: string; delay_ms?: number }, @Res({ passthrough: true }) res: unknown) {
    const [row] = await this.txHost.tx.query<{ id: string }[]>('INSERT INTO lib_widgets (scope, name) VALUES ($1, $2) RETURNING id', [
      principal(req),
      body.name,
    ]);
    if (body.delay_ms) await sleep(body.delay_ms);
    HttpResponse.of(res).setHeader('Location', `/lib/widgets/${row.id}`);
    return { id: row.id, name: body.name, zeta: 1, alpha: 2 };
  }

  /** A route whose answer holds a token shown once: it is stored in lib_tokens only (TokenReplays). */
  @Post('tokens')
  @Idempotent({ replay: TokenReplays })
  async token(@Req() req: HeaderRequest, @Body() body: { name: string }) {
    const token = randomBytes(16).toString('hex');
    const [row] = await this.txHost.tx.query<{ id: string }[]>('INSERT INTO lib_tokens (scope, name, token) VALUES ($1, $2, $3) RETURNING id', [
      principal(req),
      body.name,
      token,
    ]);
    return { id: row.id, name: body.name, token };
  }

  /** A phased route: the row in a first phase with its recovery point, the response in the last. */
  @Post('phased')
  @Idempotent({ phased: 'lib-widget' })
  async phased(@Req() req: HeaderRequest, @Body() body: { name: string }, @Operation() op: PhasedOperation<{ id: string }>) {
    const id =
      op.state?.id ??
      (await op.checkpoint(
        'inserted',
        async () => {
          const [row] = await this.txHost.tx.query<{ id: string }[]>('INSERT INTO lib_widgets (scope, name) VALUES ($1, $2) RETURNING id', [
            principal(req),
            body.name,
          ]);
          return row.id;
        },
        (rowId) => ({ id: rowId }),
      ));
    return op.finish(async () => ({ id, name: body.name, phased: true }), { location: (r) => `/lib/widgets/${r.id}` });
  }

  /**
   * The same phases inside a transaction the app opens itself (every phase joins
   * it): the module must leave that transaction's COMMIT to the app, so the row
   * written after finish() commits with the rest, in the same transaction.
   */
  @Post('outer')
  @Idempotent({ phased: 'lib-outer' })
  outer(@Req() req: HeaderRequest, @Body() body: { name: string }, @Operation() op: PhasedOperation<{ id: string }>) {
    const insert = async (name: string) =>
      (await this.txHost.tx.query<{ id: string }[]>('INSERT INTO lib_widgets (scope, name) VALUES ($1, $2) RETURNING id', [principal(req), name]))[0].id;
    return this.txHost.withTransaction(async () => {
      const id = await op.checkpoint('inserted', () => insert(body.name), (rowId) => ({ id: rowId }));
      const result = await op.finish(async () => ({ id, name: body.name }));
      await insert(`${body.name}: after finish()`);
      return result;
    });
  }
}

@Module({ controllers: [LibraryDemoController], providers: [WidgetGates, TokenReplays] })
class LibraryDemoModule implements OnModuleInit {
  constructor(private readonly dataSource: DataSource) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query(
      `CREATE TABLE IF NOT EXISTS lib_widgets (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), scope text NOT NULL, name text NOT NULL)`,
    );
    await this.dataSource.query(
      `CREATE TABLE IF NOT EXISTS lib_tokens (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), scope text NOT NULL, name text NOT NULL, token text NOT NULL)`,
    );
  }
}


export interface LibraryApp {
  app: INestApplication;
  db: TestDatabase;
  dataSource: DataSource;
  /** Base URL when listening. */
  url?: string;
  close(): Promise<void>;
}

export type Platform = 'express' | 'fastify';

export interface LibraryAppOptions {
  /** The URL the app connects with, from the database's (e.g. through a proxy). */
  databaseUrl?(url: string): string;
  idempotency?: IdempotencyModuleOptions;
  /** Modules of the test's own routes, besides the library demo's. */
  imports?: (Type | DynamicModule)[];
  /** Another instance on an existing database (left for its owner to drop); a fresh one otherwise. */
  database?: TestDatabase;
  /** Listen on a real port (separate sockets for races). */
  listen?: boolean;
  /** node-postgres clients that pipeline (TypeORM's `extra: { pipeline: true }`, as the library's setup recommends). */
  pipeline?: boolean;
}

/** Boots the library demo on a fresh database, the way a new Nest + TypeORM app would wire the module. */
export async function createLibraryApp(platform: Platform = 'express', options: LibraryAppOptions = {}): Promise<LibraryApp> {
  const db = options.database ?? (await createDatabase());
  const url = options.databaseUrl ? options.databaseUrl(db.url) : db.url;
  const drop = () => (options.database ? Promise.resolve() : db.drop());
  let app: INestApplication | undefined;
  let baseUrl: string | undefined;
  try {
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url, ...(options.pipeline ? { extra: { pipeline: true } } : {}) }),
        IdempotencyModule.forRoot({
          scope: principal,
          policyUrl: '/docs/idempotency',
          purge: { enabled: false },
          recovery: { enabled: false },
          ...options.idempotency,
          postgres: { tableName: LIBRARY_TABLE, ...options.idempotency?.postgres },
        }),
        LibraryDemoModule,
        ...(options.imports ?? []),
      ],
    }).compile();
    app = platform === 'fastify' ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false }) : moduleRef.createNestApplication({ logger: false });
    if (options.listen) {
      await app.listen(0, '127.0.0.1');
      baseUrl = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    } else {
      await app.init();
      if (platform === 'fastify') await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
    }
  } catch (error) {
    // A startup refused (what some suites assert): close what did start, then report.
    await app?.close().catch(() => undefined);
    await drop().catch(() => undefined);
    throw error;
  }
  const started = app;
  return {
    app: started,
    db,
    dataSource: started.get(DataSource),
    url: baseUrl,
    close: async () => {
      await started.close();
      await drop();
    },
  };
}
