import { INestApplicationContext } from '@nestjs/common';
import { ClsService } from 'nestjs-cls';
import { IDEMPOTENCY_CLS } from '../config/idempotency.options';
import { IdempotencyStores } from '../stores/idempotency-stores';
import { IdempotencyStoreKind } from '../config/module-options';
import { StoreContractSubject } from './store-contract-subject';

/**
 * The store of kind `kind` of an app's IdempotencyModule (the one its routes
 * use, with the app's options: table, pooler, encryption), with the context its
 * units need (nestjs-cls's). For the contract kit, or a benchmark that drives a
 * store directly.
 */
export function idempotencyStoreOf(app: INestApplicationContext, kind: IdempotencyStoreKind = 'postgres'): Required<Omit<StoreContractSubject, 'close'>> {
  const store = app.get(IdempotencyStores, { strict: false }).of(kind);
  const cls = app.get<ClsService>(IDEMPOTENCY_CLS, { strict: false });
  return { store, inContext: (work) => cls.run(work) };
}
