import { Controller, Get, INestApplication, Module } from '@nestjs/common';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { TransactionHost } from '@nestjs-cls/transactional';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CLS_REQ, ClsModule, ClsService, InjectableProxy } from 'nestjs-cls';
import request from 'supertest';
import { transactionalClsModule } from 'safe-retries';
import { TestDatabase, createDatabase } from '../support/test-services';

/** A nestjs-cls Proxy Provider: one instance per request, built when the request's context is set up. */
@InjectableProxy()
class RequestPath {
  readonly probe: unknown;
  constructor(private readonly cls: ClsService) {
    this.probe = this.cls.get<{ headers: Record<string, unknown> }>(CLS_REQ).headers['x-probe'];
  }
}

@Controller('proxy')
class ProxyController {
  constructor(private readonly requestPath: RequestPath) {}

  @Get()
  get(): { probe: unknown } {
    return { probe: this.requestPath.probe };
  }
}

@Module({ imports: [ClsModule.forFeature(RequestPath)], controllers: [ProxyController] })
class ProxyDemoModule {}

@Controller('context')
class ContextController {
  constructor(
    private readonly txHost: TransactionHost,
    private readonly cls: ClsService,
  ) {}

  @Get()
  async get(): Promise<{ inTransaction: boolean; inContext: boolean; requestId: unknown }> {
    // The transaction opens a context of its own when the request has none.
    const inTransaction = await this.txHost.withTransaction(async () => this.txHost.isTransactionActive());
    const inContext = this.cls.isActive();
    return { inTransaction, inContext, requestId: inContext ? this.cls.get<{ id?: unknown }>(CLS_REQ)?.id : undefined };
  }
}

@Module({ controllers: [ContextController] })
class ContextDemoModule {}

/** One app per case, on one database; `hook`: the app opens each request's context in a Fastify onRequest hook. */
describe('transactionalClsModule() (e2e)', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];

  async function boot(
    options: Parameters<typeof transactionalClsModule>[0],
    demo: typeof ProxyDemoModule | typeof ContextDemoModule,
    hook = false,
  ): Promise<INestApplication> {
    const moduleRef = await Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url }), transactionalClsModule(options), demo],
    }).compile();
    const app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter({ genReqId: () => 'req-1' }), { logger: false });
    if (hook) {
      const cls = app.get(ClsService);
      app.getHttpAdapter().getInstance().addHook('onRequest', (request, _reply, done) => {
        cls.run(() => {
          cls.set(CLS_REQ, request);
          done();
        });
      });
    }
    await app.init();
    await app.getHttpAdapter().getInstance().ready();
    apps.push(app);
    return app;
  }

  beforeAll(async () => {
    db = await createDatabase();
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db.drop();
  });

  /**
   * Proxy Providers are resolved per request, as nestjs-cls does, unless the app
   * turns that off (`resolveProxyProviders: false`, which this app does: it has
   * none, and each request saves the cost).
   */
  describe('and Proxy Providers', () => {
    it('resolves them per request by default', async () => {
      const app = await boot({}, ProxyDemoModule);
      const res = await request(app.getHttpServer()).get('/proxy').set('X-Probe', 'one').expect(200);
      expect(res.body).toEqual({ probe: 'one' });
    });

    it('leaves them unresolved when turned off: they then read as empty', async () => {
      const app = await boot({ resolveProxyProviders: false }, ProxyDemoModule);
      const res = await request(app.getHttpServer()).get('/proxy').set('X-Probe', 'two').expect(200);
      expect(res.body).toEqual({});
    });
  });

  /**
   * `middleware: false` (this app's setting): nestjs-cls mounts no middleware and
   * the app opens each request's context in a Fastify onRequest hook, as
   * packages/idempotency/docs/contexts.md ("Fastify") shows and configureApp does.
   */
  describe('and the request context', () => {
    it('opens it in the middleware by default', async () => {
      const app = await boot({}, ContextDemoModule);
      const res = await request(app.getHttpServer()).get('/context').expect(200);
      expect(res.body).toEqual({ inTransaction: true, inContext: true, requestId: 'req-1' });
    });

    it('with middleware: false, a request has no context of its own until the app opens one', async () => {
      const app = await boot({ middleware: false }, ContextDemoModule);
      const res = await request(app.getHttpServer()).get('/context').expect(200);
      expect(res.body).toEqual({ inTransaction: true, inContext: false });
    });

    it('with middleware: false and the onRequest hook, the handler runs in the request context', async () => {
      const app = await boot({ middleware: false }, ContextDemoModule, true);
      const res = await request(app.getHttpServer()).get('/context').expect(200);
      expect(res.body).toEqual({ inTransaction: true, inContext: true, requestId: 'req-1' });
    });
  });
});
