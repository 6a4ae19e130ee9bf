import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Body, Controller, INestApplication, LoggerService, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { InjectDataSource, TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import type { Request } from 'express';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { IdempotencyModule, IdempotencyModuleOptions, Idempotent } from 'safe-retries';
import { createDatabase } from '../support/test-services';

/**
 * An app as `nest new` makes it, with TypeORM and the README's three steps, and
 * no authentication and no policy page: what a new user meets.
 */
@Controller('notes')
class NotesController {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  @Post()
  @Idempotent()
  async create(@Body() dto: { text: string }): Promise<{ text: string }> {
    await this.txHost.tx.query('INSERT INTO notes (text) VALUES ($1)', [dto.text]);
    return { text: dto.text };
  }

  /** The mistake: a write on a connection of the data source's own. */
  @Post('direct')
  @Idempotent()
  async direct(@Body() dto: { text: string }): Promise<{ text: string }> {
    await this.dataSource.query('INSERT INTO notes (text) VALUES ($1)', [dto.text]);
    return { text: dto.text };
  }
}

/** The server's log, as a test reads it. */
class CapturedLog implements LoggerService {
  readonly errors: string[] = [];
  log(): void {}
  warn(): void {}
  error(message: unknown): void {
    this.errors.push(String(message));
  }
}

const README = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
/** The scope of the README's first example (step 2). */
const README_SCOPE = /IdempotencyModule\.forRoot\(\{ scope: ([^}]*) \}\)/.exec(README)?.[1];

describe('an app without authentication and without a policy page', () => {
  let db: { url: string; drop(): Promise<void> };
  let app: INestApplication;
  const log = new CapturedLog();

  async function start(options: IdempotencyModuleOptions): Promise<void> {
    const moduleRef = await Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url }), IdempotencyModule.forRoot({ purge: { enabled: false }, recovery: { enabled: false }, ...options })],
      controllers: [NotesController],
    }).compile();
    app = moduleRef.createNestApplication({ logger: log });
    await app.init();
  }
  const post = (path: string, text: string, key = randomUUID()) => request(app.getHttpServer()).post(path).set('Idempotency-Key', key).send({ text });
  const notes = async (text: string): Promise<number> => Number((await app.get(DataSource).query('SELECT count(*) AS n FROM notes WHERE text = $1', [text]))[0].n);

  beforeAll(async () => {
    db = await createDatabase();
    const setup = new DataSource({ type: 'postgres', url: db.url });
    await setup.initialize();
    await setup.query('CREATE TABLE notes (id serial PRIMARY KEY, text text NOT NULL)');
    await setup.destroy();
  });
  afterEach(async () => {
    await app?.close();
    log.errors.length = 0;
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("works with the README's first example, as written", async () => {
    expect(README_SCOPE).toBe("() => 'public'");
    await start({ scope: () => 'public' });
    const key = randomUUID();
    const first = await post('/notes', 'readme', key).expect(201);
    const replay = await post('/notes', 'readme', key).expect(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.text).toBe(first.text);
    expect(await notes('readme')).toBe(1);
  });

  it('answers a request whose scope is empty with a problem naming the cause, logged once per route with the fix', async () => {
    await start({ scope: (req) => (req as Request & { user?: { id: string } }).user?.id });
    for (const text of ['no-scope-1', 'no-scope-2']) {
      const res = await post('/notes', text).expect(500);
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(res.body).toMatchObject({ status: 500, code: 'idempotency_scope_missing', type: 'about:blank' });
      expect(res.body.detail).toMatch(/could not tell which client sent this request/);
      expect(res.headers['link']).toBeUndefined();
      expect(await notes(text)).toBe(0);
    }
    const logged = log.errors.filter((line) => line.includes('idempotency_scope_missing'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain('POST NotesController.create');
    expect(logged[0]).toContain("scope: () => 'public'");
  });

  it('refuses a write outside the key transaction without naming internals to the client, logged once per route with the fix', async () => {
    await start({ scope: () => 'public' });
    for (const text of ['direct-1', 'direct-2']) {
      const res = await post('/notes/direct', text).expect(500);
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(res.body).toMatchObject({ status: 500, code: 'idempotency_write_outside_transaction', type: 'about:blank' });
      expect(res.headers['link']).toBeUndefined();
      expect(res.text).not.toMatch(/NotesController|direct|Controller|dataSource|DataSource|Inject|INSERT|notes/);
      expect(await notes(text)).toBe(0);
    }
    const logged = log.errors.filter((line) => line.includes('idempotency_write_outside_transaction'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain('NotesController.direct');
    expect(logged[0]).toContain('TransactionHost');
  });

  it('points no problem at a page the app does not serve', async () => {
    await start({ scope: () => 'public' });
    const res = await request(app.getHttpServer()).post('/notes').send({ text: 'no-key' }).expect(400);
    expect(res.body).toMatchObject({ code: 'idempotency_key_missing', type: 'about:blank' });
    expect(res.headers['link']).toBeUndefined();
  });

  it('links the policy page the app says it serves', async () => {
    await start({ scope: () => 'public', policyUrl: '/policy' });
    const res = await request(app.getHttpServer()).post('/notes').send({ text: 'no-key' }).expect(400);
    expect(res.body).toMatchObject({ code: 'idempotency_key_missing', type: '/policy#idempotency_key_missing' });
    expect(res.headers['link']).toBe('</policy>; rel="describedby"');
  });
});
