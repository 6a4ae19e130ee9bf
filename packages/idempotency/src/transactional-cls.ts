import { DynamicModule } from '@nestjs/common';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import { ClsPluginTransactional } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule } from 'nestjs-cls';

/**
 * The ambient transaction the module opens around each `@Idempotent()` handler:
 * nestjs-cls, global, with its transactional plugin on the app's TypeORM data
 * source (the default one, or `dataSourceName`). Import it next to
 * `TypeOrmModule.forRoot(...)`; an app's own services reach the same
 * transaction through `TransactionHost`. Its adapter is nestjs-cls's stock
 * TransactionalAdapterTypeOrm. An app that registers ClsModule itself adds the
 * same plugin there instead (one ClsModule per app).
 *
 * `resolveProxyProviders: false` skips nestjs-cls's resolution of Proxy
 * Providers (`ClsModule.forFeature…`, `@InjectableProxy()`) on each request,
 * which costs every request a dynamic `require` and an await in the
 * middleware. The module uses none; an app that uses none may
 * turn it off (a Proxy Provider left unresolved reads as empty, silently).
 *
 * `middleware: false` mounts no nestjs-cls middleware: the app then opens the
 * context of each request itself, before anything that uses it runs (on
 * Fastify, `cls.run(() => done())` in the first onRequest hook; see
 * packages/idempotency/README.md). With no Nest middleware left, @fastify/middie copies
 * nothing onto the Node request and runs no middleware chain per request.
 */
export function transactionalClsModule(
  options: { dataSourceName?: string; resolveProxyProviders?: boolean; middleware?: boolean } = {},
): DynamicModule {
  return ClsModule.forRoot({
    global: true,
    middleware: { mount: options.middleware ?? true, resolveProxyProviders: options.resolveProxyProviders ?? true },
    plugins: [
      new ClsPluginTransactional({
        imports: [TypeOrmModule],
        adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken(options.dataSourceName) }),
      }),
    ],
  });
}
