import { DynamicModule, Global, Module, ModuleMetadata, Provider } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Registry } from 'prom-client';
import { parseDuration } from './duration';
import { IdempotencyContext } from './idempotency.context';
import { idempotencyTable } from './idempotency-table';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyMetrics } from './idempotency.metrics';
import { IdempotencyPurgeService } from './idempotency-purge.service';
import { IdempotencyRecovery } from './idempotency-recovery.service';
import {
  IDEMPOTENCY_OPTIONS,
  IDEMPOTENCY_REGISTRY,
  IdempotencyModuleOptions,
  ResolvedIdempotencyOptions,
} from './idempotency.options';
import { IDEMPOTENCY_STORE } from './idempotency.store';
import { PostgresIdempotencyStore } from './postgres-idempotency.store';

const RAW_OPTIONS = Symbol('IDEMPOTENCY_RAW_OPTIONS');

export function resolveIdempotencyOptions(o: IdempotencyModuleOptions): ResolvedIdempotencyOptions {
  const leaseMs = parseDuration(o.lease ?? '30s');
  const retentionMs = parseDuration(o.retention ?? '24h');
  if (leaseMs <= 0 || leaseMs >= retentionMs) throw new RangeError('idempotency lease must be > 0 and shorter than the retention');
  return {
    table: idempotencyTable(o.tableName),
    leaseMs,
    retentionMs,
    scope: o.scope ?? ((req) => (req as { client?: { id?: string } }).client?.id),
    claimPoolSize: o.claimPoolSize ?? 10,
    policyUrl: o.policyUrl ?? '/docs/idempotency',
    purge: {
      enabled: o.purge?.enabled ?? true,
      cron: o.purge?.cron ?? '0 */10 * * * *',
      batchSize: o.purge?.batchSize ?? 5_000,
      budgetMs: parseDuration(o.purge?.budget ?? '60s'),
    },
    recovery: {
      enabled: o.recovery?.enabled ?? true,
      intervalMs: parseDuration(o.recovery?.interval ?? '1m'),
      batchSize: o.recovery?.batchSize ?? 100,
    },
  };
}

export interface IdempotencyModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  inject?: never[] | unknown[];
  useFactory: (...args: never[]) => IdempotencyModuleOptions | Promise<IdempotencyModuleOptions>;
}

/**
 * The idempotency module: `@Idempotent()` and everything behind it. Reusable in
 * any NestJS + TypeORM + PostgreSQL service that has registered TypeOrmModule and
 * nestjs-cls's transactional plugin; it knows nothing of this app's features.
 */
@Global()
@Module({})
export class IdempotencyModule {
  static forRoot(options: IdempotencyModuleOptions = {}): DynamicModule {
    return IdempotencyModule.build([{ provide: RAW_OPTIONS, useValue: options }]);
  }

  static forRootAsync(options: IdempotencyModuleAsyncOptions): DynamicModule {
    return IdempotencyModule.build(
      [{ provide: RAW_OPTIONS, useFactory: options.useFactory, inject: (options.inject ?? []) as never[] }],
      options.imports,
    );
  }

  private static build(optionProviders: Provider[], imports: ModuleMetadata['imports'] = []): DynamicModule {
    const providers: Provider[] = [
      ...optionProviders,
      { provide: IDEMPOTENCY_OPTIONS, useFactory: resolveIdempotencyOptions, inject: [RAW_OPTIONS] },
      {
        provide: IDEMPOTENCY_REGISTRY,
        useFactory: (o: IdempotencyModuleOptions) => o.registry ?? new Registry(),
        inject: [RAW_OPTIONS],
      },
      IdempotencyMetrics,
      { provide: IDEMPOTENCY_STORE, useClass: PostgresIdempotencyStore },
      IdempotencyInterceptor,
      IdempotencyContext,
      IdempotencyPurgeService,
      IdempotencyRecovery,
    ];
    return {
      module: IdempotencyModule,
      imports: [...imports, ScheduleModule.forRoot()],
      providers,
      exports: [IDEMPOTENCY_OPTIONS, IDEMPOTENCY_STORE, IdempotencyMetrics, IdempotencyInterceptor, IdempotencyContext, IdempotencyPurgeService, IdempotencyRecovery],
    };
  }
}
