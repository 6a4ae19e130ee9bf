import { randomUUID } from 'node:crypto';
import { Body, Controller, INestApplication, Injectable, OnModuleInit, Post, Provider, Req, Scope, Type } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { Client } from 'pg';
import request from 'supertest';
import { IdempotencyModule, IdempotencyRecovery, Idempotent, Operation, PhasedOperation, Resumes, phasedOperation, transactionalClsModule } from 'safe-retries';
import { idempotencyMigrations } from 'safe-retries/migrations';
import { TestDatabase, createDatabase } from '../support/test-services';

/**
 * Resumers found, not registered: a phased operation declared once with its
 * state, a route that runs it, a provider method marked @Resumes() that the
 * recovery job calls, and the startup refusing an operation with no resumer
 * or with two, in an app with nothing of this service.
 */
interface WidgetState {
  id: string;
  name: string;
}
const WidgetOperation = phasedOperation<WidgetState>('resumers.widget');
const GadgetOperation = phasedOperation<{ gadget: number }>('resumers.gadget');

type PrincipalRequest = { headers: Record<string, string | string[] | undefined> };
const PRINCIPAL = 'x-principal';
const principal = (req: PrincipalRequest) => {
  const value = req.headers[PRINCIPAL];
  return typeof value === 'string' ? value : undefined;
};

@Injectable()
class Widgets {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  async insert(scope: string, name: string): Promise<string> {
    const [row] = await this.txHost.tx.query<{ id: string }[]>('INSERT INTO resumed_widgets (scope, name) VALUES ($1, $2) RETURNING id', [scope, name]);
    return row.id;
  }

  /** The last phase, from the state the first one saved: by a retry or by the recovery job. */
  @Resumes(WidgetOperation)
  resume(op: PhasedOperation<WidgetState>): Promise<{ id: string; name: string; resumed_by: string }> {
    const state = op.state;
    if (!state) throw new Error('nothing to resume before the first phase');
    return op.finish(async () => {
      await this.txHost.tx.query('UPDATE resumed_widgets SET finished = finished + 1 WHERE id = $1', [state.id]);
      return { id: state.id, name: state.name, resumed_by: 'Widgets.resume' };
    });
  }
}

@Controller('widgets')
class WidgetsController {
  constructor(private readonly widgets: Widgets) {}

  /** `crash: true`: the request fails after its first phase, leaving the operation at its recovery point. */
  @Post()
  @Idempotent({ phased: WidgetOperation })
  async create(@Req() req: PrincipalRequest, @Body() body: { name: string; crash?: boolean }, @Operation() op: PhasedOperation<WidgetState>) {
    if (op.recoveryPoint !== null) return this.widgets.resume(op);
    const scope = principal(req)!;
    await op.checkpoint('inserted', () => this.widgets.insert(scope, body.name), (id) => ({ id, name: body.name }));
    if (body.crash) throw new Error('the worker died after its first phase');
    return this.widgets.resume(op);
  }
}

@Controller('gadgets')
class GadgetsController {
  @Post()
  @Idempotent({ phased: GadgetOperation })
  create(@Operation() op: PhasedOperation<{ gadget: number }>) {
    return op.finish(async () => ({ gadget: 1 }));
  }

  @Post('again')
  @Idempotent({ phased: GadgetOperation })
  again(@Operation() op: PhasedOperation<{ gadget: number }>) {
    return op.finish(async () => ({ gadget: 2 }));
  }
}

@Injectable()
class SecondWidgetResumer {
  @Resumes(WidgetOperation)
  async resume(op: PhasedOperation<WidgetState>): Promise<void> {
    await op.release(async () => undefined);
  }
}

/** An app that resumes by hand, in onModuleInit: it counts like a @Resumes() method. */
@Injectable()
class GadgetsByHand implements OnModuleInit {
  constructor(private readonly recovery: IdempotencyRecovery) {}

  onModuleInit(): void {
    this.recovery.register(GadgetOperation, (op) => op.finish(async () => ({ gadget: op.state?.gadget ?? 0 })));
  }
}

@Injectable()
class GadgetResumer {
  @Resumes(GadgetOperation)
  async resume(op: PhasedOperation<{ gadget: number }>): Promise<void> {
    await op.release(async () => undefined);
  }
}

@Injectable({ scope: Scope.REQUEST })
class RequestScopedResumer {
  @Resumes(GadgetOperation)
  async resume(op: PhasedOperation<{ gadget: number }>): Promise<void> {
    await op.release(async () => undefined);
  }
}

/** Never provided: what the compiler refuses (the root type check fails if it stops refusing it). */
export class MistypedResumers {
  // @ts-expect-error: the method takes another operation's state
  @Resumes(WidgetOperation)
  async other(op: PhasedOperation<{ gadget: number }>): Promise<void> {
    await op.release(async () => undefined);
  }

  // @ts-expect-error: a resumer takes the operation
  @Resumes(WidgetOperation)
  async nothing(name: string): Promise<string> {
    return name;
  }

  register(recovery: IdempotencyRecovery): void {
    // @ts-expect-error: registered by hand, the function is checked the same way
    recovery.register(GadgetOperation, async (op: PhasedOperation<WidgetState>) => op.state?.id);
  }
}

describe('phased operations resumed by @Resumes() methods (e2e)', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];

  beforeAll(async () => {
    db = await createDatabase();
    const client = new Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(
        'CREATE TABLE resumed_widgets (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), scope text NOT NULL, name text NOT NULL, finished int NOT NULL DEFAULT 0)',
      );
    } finally {
      await client.end();
    }
  });
  afterEach(async () => {
    // Closed even after a refused startup: its recovery interval may already be scheduled.
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(() => db.drop());

  /** An app of these controllers and providers; not yet initialised. */
  async function app(parts: { controllers?: Type[]; providers?: Provider[]; recovery?: boolean }): Promise<INestApplication> {
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: db.url, migrations: idempotencyMigrations(), migrationsRun: true }),
        ScheduleModule.forRoot(),
        transactionalClsModule(),
        IdempotencyModule.forRoot({ scope: principal, purge: { enabled: false }, recovery: { enabled: parts.recovery ?? true, interval: '1h' } }),
      ],
      controllers: parts.controllers ?? [],
      providers: parts.providers ?? [],
    }).compile();
    const created = moduleRef.createNestApplication({ logger: false });
    apps.push(created);
    return created;
  }

  it('finds the @Resumes() method, and the recovery job resumes an operation left at its recovery point with it', async () => {
    const widgets = await app({ controllers: [WidgetsController], providers: [Widgets] });
    await widgets.init();
    const key = randomUUID();
    const body = { name: `abandoned ${key}`, crash: true };
    const post = () => request(widgets.getHttpServer()).post('/widgets').set(PRINCIPAL, 'acct_1').set('Idempotency-Key', key).send(body);

    await post().expect(500);
    const client = new Client({ connectionString: db.url });
    await client.connect();
    const rows = () => client.query<{ id: string; finished: number }>('SELECT id, finished FROM resumed_widgets WHERE name = $1', [body.name]).then((r) => r.rows);
    try {
      expect(await rows()).toEqual([{ id: expect.any(String), finished: 0 }]);

      // No client retries: the job takes the operation over and calls Widgets.resume with its saved state.
      expect(await widgets.get(IdempotencyRecovery).runOnce()).toMatchObject({ taken: 1, finished: 1, failed: 0 });
      const [row] = await rows();
      expect(row.finished).toBe(1);

      // The client's late retry gets the response the resumer stored.
      const replay = await post().expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toEqual({ id: row.id, name: body.name, resumed_by: 'Widgets.resume' });
      expect(await rows()).toEqual([{ id: row.id, finished: 1 }]);
      expect(await widgets.get(IdempotencyRecovery).runOnce()).toMatchObject({ taken: 0 });
    } finally {
      await client.end();
    }
  });

  it("takes an operation over only under its own name, typed with its state", async () => {
    const widgets = await app({ controllers: [WidgetsController], providers: [Widgets] });
    await widgets.init();
    const key = randomUUID();
    const body = { name: `taken over ${key}`, crash: true };
    const post = () => request(widgets.getHttpServer()).post('/widgets').set(PRINCIPAL, 'acct_2').set('Idempotency-Key', key).send(body);
    await post().expect(500);
    const recovery = widgets.get(IdempotencyRecovery);

    const wrong = recovery.takeOver(GadgetOperation, 'acct_2', key, (op) => op.finish(async () => ({ gadget: op.state?.gadget })));
    await expect(wrong).rejects.toThrow('the key holds the operation resumers.widget, not resumers.gadget');
    // Its lease was given up at once: the right name takes it over now.
    const taken = await recovery.takeOver(WidgetOperation, 'acct_2', key, (op) => widgets.get(Widgets).resume(op));
    expect(taken).toEqual({ taken: true, result: { id: expect.any(String), name: body.name, resumed_by: 'Widgets.resume' } });
    const replay = await post().expect(201);
    expect(replay.body).toEqual(taken.taken && taken.result);
  });

  it('refuses to start when a phased route has no resumer, naming the operation and its routes', async () => {
    const gadgets = await app({ controllers: [GadgetsController, WidgetsController], providers: [Widgets] });
    await expect(gadgets.init()).rejects.toThrow(
      'no resumer for the phased operation resumers.gadget (@Idempotent() on GadgetsController.create, GadgetsController.again): ' +
        'mark the method that resumes it with @Resumes(), or register one with IdempotencyRecovery.register() in onModuleInit; ' +
        'the recovery job ends what no retry does',
    );
  });

  it('counts a resume function the app registers by hand in onModuleInit', async () => {
    const gadgets = await app({ controllers: [GadgetsController], providers: [GadgetsByHand] });
    await gadgets.init();
    expect(gadgets.get(IdempotencyRecovery).hasResumer(GadgetOperation)).toBe(true);
  });

  it('does not ask for resumers while the recovery job is off', async () => {
    const gadgets = await app({ controllers: [GadgetsController], recovery: false });
    await gadgets.init();
    expect(gadgets.get(IdempotencyRecovery).hasResumer(GadgetOperation)).toBe(false);
  });

  it('refuses to start with two resumers for one operation, naming both', async () => {
    const twice = await app({ controllers: [WidgetsController], providers: [Widgets, SecondWidgetResumer] });
    await expect(twice.init()).rejects.toThrow(
      /^two resumers for the phased operation resumers\.widget: (Widgets\.resume and SecondWidgetResumer\.resume|SecondWidgetResumer\.resume and Widgets\.resume); an operation has one$/,
    );
  });

  it('refuses a @Resumes() method next to a resume function registered by hand for the same operation', async () => {
    const both = await app({ controllers: [GadgetsController], providers: [GadgetResumer, GadgetsByHand] });
    await expect(both.init()).rejects.toThrow('a resume function for resumers.gadget is already registered (by @Resumes() or register()); an operation has one');
  });

  it('refuses a @Resumes() method on a request-scoped provider', async () => {
    const scoped = await app({ controllers: [GadgetsController], providers: [RequestScopedResumer] });
    await expect(scoped.init()).rejects.toThrow(
      '@Resumes(resumers.gadget) on RequestScopedResumer.resume: a request-scoped (or request-dependent) provider; the recovery job calls one instance, with no request, so a resumer lives on a singleton',
    );
  });
});
