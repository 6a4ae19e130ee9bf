import { Global, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { IdempotencyModule, IdempotencyModuleOptions } from 'safe-retries';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from 'safe-retries/swagger';

/** The app's data source, never connected: compiling the module reads its options and opens nothing. */
@Global()
@Module({ providers: [{ provide: DataSource, useValue: new DataSource({ type: 'postgres', url: 'postgres://unused@127.0.0.1:1/unused' }) }], exports: [DataSource] })
class UnconnectedDataSource {}

/**
 * The options `IdempotencyModule.forRoot(options)` resolves, as an app reads
 * them (`app.get(IDEMPOTENCY_OPTIONS)`, safe-retries/swagger); options it
 * refuses stop the compilation of a Nest testing module with the error.
 */
export async function resolvedOptions(options: IdempotencyModuleOptions): Promise<ResolvedIdempotencyOptions> {
  const moduleRef = await Test.createTestingModule({ imports: [UnconnectedDataSource, IdempotencyModule.forRoot(options)] }).compile();
  try {
    return moduleRef.get<ResolvedIdempotencyOptions>(IDEMPOTENCY_OPTIONS);
  } finally {
    await moduleRef.close();
  }
}
