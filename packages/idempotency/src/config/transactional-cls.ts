import { DynamicModule } from '@nestjs/common';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import { ClsPluginTransactional } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { ClsModule, ClsPlugin } from 'nestjs-cls';

/**
 * Optional: nestjs-cls's ClsModule for an app that wants to configure it
 * (IdempotencyModule needs none: it registers the transactional plugin and
 * opens each request's context itself when nothing else has): global, with
 * the same transactional plugin on the app's TypeORM data source (the default
 * one, or `dataSourceName`); both plugins keep the transaction in the same
 * slot of the context, so either TransactionHost reaches it.
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
 * packages/idempotency/docs/contexts.md, "Fastify"). With no Nest middleware left, @fastify/middie copies
 * nothing onto the Node request and runs no middleware chain per request.
 */
export function transactionalClsModule(
  options: { dataSourceName?: string; resolveProxyProviders?: boolean; middleware?: boolean } = {},
): DynamicModule {
  return ClsModule.forRoot({
    global: true,
    middleware: { mount: options.middleware ?? true, resolveProxyProviders: options.resolveProxyProviders ?? true },
    plugins: [transactionalPlugin(options.dataSourceName)],
  });
}

/** nestjs-cls's transactional plugin on the app's TypeORM data source (the default one, or `dataSourceName`). */
export function transactionalPlugin(dataSourceName?: string): ClsPlugin {
  return new ClsPluginTransactional({
    imports: [TypeOrmModule],
    adapter: new TransactionalAdapterTypeOrm({ dataSourceToken: getDataSourceToken(dataSourceName) }),
  });
}
