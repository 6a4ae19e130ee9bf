import { randomUUID } from 'node:crypto';
import { Body, Controller, INestApplication, Injectable, Module, OnModuleInit, Post } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { InjectDataSource, InjectEntityManager, InjectRepository, TypeOrmModule } from '@nestjs/typeorm';
import { Propagation, TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import request from 'supertest';
import { IdempotencyModule, Idempotent } from 'safe-retries';
import { Column, DataSource, Entity, EntityManager, PrimaryGeneratedColumn, Repository } from 'typeorm';
import { keyId } from '../../packages/idempotency/test/support/keys-table';
import { countRows } from '../support/app';
import { TestDatabase, createTestDatabase } from '../support/database';

/**
 * A handler's writes and its Idempotency-Key commit together, whichever way
 * the handler reaches TypeORM: through TransactionHost they join the key's
 * transaction; through anything of the data source itself (an injected
 * repository or manager, dataSource.getRepository/manager/query), which would
 * commit on a connection of its own, they are refused: 500 naming the route,
 * nothing committed, the key free for a retry. The app is wired in the three
 * steps of the README (TypeORM, IdempotencyModule.forRoot, @Idempotent()).
 */
@Entity({ name: 'notes' })
class Note {
  @PrimaryGeneratedColumn('uuid')
  id!: string;

  @Column({ type: 'text' })
  text!: string;
}

interface NoteDto {
  text: string;
}

@Injectable()
class NotesService {
  constructor(
    @InjectRepository(Note) private readonly repository: Repository<Note>,
    @InjectEntityManager() private readonly manager: EntityManager,
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
  ) {}

  readonly ways = {
    'inject-repository': (text: string) => this.repository.save({ text }),
    'inject-entity-manager': (text: string) => this.manager.save(Note, { text }),
    'data-source-repository': (text: string) => this.dataSource.getRepository(Note).save({ text }),
    'data-source-manager': (text: string) => this.dataSource.manager.save(Note, { text }),
    'data-source-query': (text: string) => this.dataSource.query('INSERT INTO notes (text) VALUES ($1)', [text]),
    'tx-host': (text: string) => this.txHost.tx.getRepository(Note).save({ text }),
    'tx-host-query': (text: string) => this.txHost.tx.query('INSERT INTO notes (text) VALUES ($1)', [text]),
    // A transaction the code opens itself through TransactionHost: its own choice, committed on its own.
    'tx-host-requires-new': (text: string) => this.txHost.withTransaction(Propagation.RequiresNew, () => this.txHost.tx.getRepository(Note).save({ text })),
  } as const;

  /** A read outside the transaction loses nothing. */
  async readThenWrite(text: string): Promise<unknown> {
    await this.repository.count();
    await this.dataSource.query('SELECT 1');
    return this.txHost.tx.getRepository(Note).save({ text });
  }
}

type Way = keyof NotesService['ways'];

@Controller('notes')
class NotesController {
  constructor(private readonly notes: NotesService) {}

  @Post('durable')
  @Idempotent()
  durable(@Body() dto: NoteDto & { way: Way }) {
    return this.notes.ways[dto.way](dto.text);
  }

  @Post('one')
  @Idempotent({ commit: 'one' })
  one(@Body() dto: NoteDto & { way: Way }) {
    return this.notes.ways[dto.way](dto.text);
  }

  /** Catches the refusal and answers as if all went well: still refused, still nothing committed. */
  @Post('swallowed')
  @Idempotent()
  async swallowed(@Body() dto: NoteDto) {
    await this.notes.ways['inject-repository'](dto.text).catch(() => undefined);
    return { ok: true };
  }

  @Post('reads')
  @Idempotent()
  reads(@Body() dto: NoteDto) {
    return this.notes.readThenWrite(dto.text);
  }

  /** Not protected: a write of its own connection is the app's business. */
  @Post('plain')
  plain(@Body() dto: NoteDto) {
    return this.notes.ways['inject-repository'](dto.text);
  }
}

@Module({ imports: [TypeOrmModule.forFeature([Note])], controllers: [NotesController], providers: [NotesService] })
class NotesModule implements OnModuleInit {
  constructor(private readonly dataSource: DataSource) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query('CREATE TABLE IF NOT EXISTS notes (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), text text NOT NULL)');
  }
}

const REFUSED: Way[] = ['inject-repository', 'inject-entity-manager', 'data-source-repository', 'data-source-manager', 'data-source-query'];
const JOINED: Way[] = ['tx-host', 'tx-host-query'];

describe.each(['express', 'fastify'] as const)('writes of an @Idempotent() handler, on %s (e2e)', (platform) => {
  let db: TestDatabase;
  let app: INestApplication;
  let dataSource: DataSource;
  const post = (path: string, key: string, body: object) =>
    request(app.getHttpServer()).post(`/notes/${path}`).set('x-principal', 'acct_9f3').set('Idempotency-Key', key).send(body);
  const notes = (text: string) => countRows(dataSource, 'notes', 'text = $1', [text]);
  const keys = (key: string) => countRows(dataSource, 'idempotency_keys', 'id = $1', [keyId('acct_9f3', key)]);

  beforeAll(async () => {
    db = await createTestDatabase();
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, autoLoadEntities: true }),
        IdempotencyModule.forRoot({
          scope: (req) => req.headers['x-principal'] as string | undefined,
          purge: { enabled: false },
          recovery: { enabled: false },
        }),
        NotesModule,
      ],
    }).compile();
    app = platform === 'fastify' ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false }) : moduleRef.createNestApplication({ logger: false });
    await app.init();
    if (platform === 'fastify') await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
    dataSource = app.get(DataSource);
  });
  afterAll(async () => {
    await app?.close();
    await db?.drop();
  });

  describe.each(['durable', 'one'])('a route that commits %s', (route) => {
    it.each(REFUSED)('refuses a write through %s: 500 naming no internals, nothing committed, the key free', async (way) => {
      const key = randomUUID();
      const text = `${route}-${way}-${key}`;
      const res = await post(route, key, { way, text }).expect(500);
      expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expect(res.body).toMatchObject({ status: 500, code: 'idempotency_write_outside_transaction' });
      // The route and the fix are in the server's log (packages/idempotency/test/new-user), not in the client's answer.
      expect(res.text).not.toMatch(/NotesController|TransactionHost|INSERT/);
      expect(await notes(text)).toBe(0);
      expect(await keys(key)).toBe(0);
      // The retry runs again, and is refused again.
      await post(route, key, { way, text }).expect(500);
      expect(await notes(text)).toBe(0);
    });

    it.each(JOINED)('commits a write through %s with the key, once', async (way) => {
      const key = randomUUID();
      const text = `${route}-${way}-${key}`;
      const first = await post(route, key, { way, text }).expect(201);
      const replay = await post(route, key, { way, text }).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.text).toBe(first.text);
      expect(await notes(text)).toBe(1);
      expect(await keys(key)).toBe(1);
    });
  });

  it('lets a transaction the code opens through TransactionHost commit on its own', async () => {
    const key = randomUUID();
    const text = `requires-new-${key}`;
    await post('durable', key, { way: 'tx-host-requires-new', text }).expect(201);
    expect(await notes(text)).toBe(1);
  });

  it('refuses the unit even when the handler catches the refusal', async () => {
    const key = randomUUID();
    const text = `swallowed-${key}`;
    const res = await post('swallowed', key, { text }).expect(500);
    expect(res.body).toMatchObject({ code: 'idempotency_write_outside_transaction' });
    expect(await notes(text)).toBe(0);
    expect(await keys(key)).toBe(0);
  });

  it('lets reads go through the data source, and the write through the transaction', async () => {
    const key = randomUUID();
    const text = `reads-${key}`;
    await post('reads', key, { text }).expect(201);
    expect(await notes(text)).toBe(1);
  });

  it('leaves a route without @Idempotent() alone', async () => {
    const text = `plain-${randomUUID()}`;
    await request(app.getHttpServer()).post('/notes/plain').send({ text }).expect(201);
    expect(await notes(text)).toBe(1);
  });
});
