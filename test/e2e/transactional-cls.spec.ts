import { Controller, Get, INestApplication, Module } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { CLS_REQ, ClsModule, ClsService, InjectableProxy } from 'nestjs-cls';
import request from 'supertest';
import { transactionalClsModule } from '../../src/idempotency';
import { TestDatabase, createTestDatabase } from '../support/database';

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

/**
 * transactionalClsModule() resolves nestjs-cls's Proxy Providers per request,
 * as nestjs-cls does, unless the app turns that off (`resolveProxyProviders:
 * false`, which this app does: it has none, and each request saves the cost).
 */
describe('transactionalClsModule() and Proxy Providers (e2e)', () => {
  let db: TestDatabase;
  const apps: INestApplication[] = [];

  async function boot(options: { resolveProxyProviders?: boolean }): Promise<INestApplication> {
    const moduleRef = await Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ type: 'postgres', url: db.url }), transactionalClsModule(options), ProxyDemoModule],
    }).compile();
    const app = moduleRef.createNestApplication(new FastifyAdapter(), { logger: false });
    await app.init();
    await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
    apps.push(app);
    return app;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db.drop();
  });

  it('resolves them per request by default', async () => {
    const app = await boot({});
    const res = await request(app.getHttpServer()).get('/proxy').set('X-Probe', 'one').expect(200);
    expect(res.body).toEqual({ probe: 'one' });
  });

  it('leaves them unresolved when turned off: they then read as empty', async () => {
    const app = await boot({ resolveProxyProviders: false });
    const res = await request(app.getHttpServer()).get('/proxy').set('X-Probe', 'two').expect(200);
    expect(res.body).toEqual({});
  });
});
