import { DynamicModule, Logger, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, DataSourceOptions } from 'typeorm';
import { transactionalClsModule } from 'safe-retries';
import { Registry } from 'prom-client';
import { BackgroundConnections } from './background-connections';
import { dataSourceOptions, runMigrationsLocked } from './data-source';
import { DatabasePing } from './database-ping';
import { ReadReplicas } from './read-replicas';
import { PREPARED_STATEMENTS } from './sql-repository';

export interface DatabaseModuleOptions {
  url: string;
  poolSize: number;
  /** Read replicas of `url` (only SqlRepository.replicaRows reads from them, through ReadReplicas); empty: none. */
  replicaUrls?: readonly string[];
  /** Apply pending migrations before anything else touches the database. */
  migrate: boolean;
  /** Whether SqlRepository names its statements (off behind a pooler that does not keep them). */
  preparedStatements: boolean;
  /** A direct (not pooled) URL of the primary, when `url` is a transaction pooler: the migrations run there. */
  directUrl?: string;
  /**
   * How long a request may be kept: a statement waits at most this for a connection
   * of the pool (the claims' pool too) and as long again for its answer.
   */
  deadlineMs: number;
}

/**
 * The TypeORM data source, migrations on boot, and the ambient transaction
 * (nestjs-cls + @nestjs-cls/transactional): services reach the current
 * transaction through `TransactionHost`, never through a passed EntityManager.
 * And DatabasePing, the health check's connection of its own,
 * ReadReplicas, the replicas' pools (their fallbacks counted in the app's
 * registry when MetricsModule is there), and BackgroundConnections, the share
 * of the pool that background work may hold.
 */
@Module({})
export class DatabaseModule {
  static forRoot(options: DatabaseModuleOptions): DynamicModule {
    const logger = new Logger('Database');
    return {
      module: DatabaseModule,
      global: true,
      providers: [
        { provide: PREPARED_STATEMENTS, useValue: options.preparedStatements },
        BackgroundConnections,
        { provide: DatabasePing, useFactory: () => new DatabasePing(options.url) },
        {
          provide: ReadReplicas,
          // The app's metrics registry, by prom-client's class (MetricsModule provides it); none: no replica metrics.
          inject: [{ token: Registry, optional: true }],
          useFactory: (registry?: Registry) => new ReadReplicas(options.replicaUrls ?? [], options.poolSize, registry),
        },
      ],
      exports: [PREPARED_STATEMENTS, BackgroundConnections, DatabasePing, ReadReplicas],
      imports: [
        TypeOrmModule.forRootAsync({
          useFactory: () => ({
            ...dataSourceOptions(options.url, options.poolSize, options.deadlineMs),
            autoLoadEntities: true,
            // main.ts has already proven the server answers; fail, don't loop.
            retryAttempts: 0,
          }),
          dataSourceFactory: async (dsOptions) => {
            if (options.migrate) {
              // On a connection of their own without the read timeout: a migration may run long.
              // On the primary (a replica receives the schema through replication), on the
              // direct URL when there is one: DDL need not hold a pooled server connection.
              const migrator = await new DataSource({
                ...dsOptions,
                ...(options.directUrl ? { url: options.directUrl } : {}),
                extra: { max: 2 },
              } as DataSourceOptions).initialize();
              try {
                const applied = await runMigrationsLocked(migrator);
                if (applied.length) logger.log(`applied migrations: ${applied.join(', ')}`);
              } finally {
                await migrator.destroy();
              }
            }
            return new DataSource(dsOptions!).initialize();
          },
        }),
        // No middleware: configureApp opens each request's context in a Fastify hook
        // (openRequestContext). The app has no Proxy Providers to resolve either.
        transactionalClsModule({ middleware: false, resolveProxyProviders: false }),
      ],
    };
  }
}
