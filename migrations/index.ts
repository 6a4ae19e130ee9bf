import { CreateClients1764460800000 } from './1764460800000-CreateClients';
import { CreateIdempotencyKeys1764460800001 } from './1764460800001-CreateIdempotencyKeys';
import { CreateOrdersPaymentsRefunds1764460800002 } from './1764460800002-CreateOrdersPaymentsRefunds';
import { PaymentPhases1764460800003 } from './1764460800003-PaymentPhases';
import { IdempotencyKeysAnyScope1764460800004 } from '../src/idempotency/migrations/1764460800004-IdempotencyKeysAnyScope';

/**
 * Every migration, in order. The data source gets classes, not a glob (TypeORM
 * 1.x loads globs with import(), which fails inside jest). `npm run
 * migration:generate -- Name` writes a new file; add it here.
 */
export const migrations = [
  CreateClients1764460800000,
  CreateIdempotencyKeys1764460800001,
  CreateOrdersPaymentsRefunds1764460800002,
  PaymentPhases1764460800003,
  IdempotencyKeysAnyScope1764460800004,
];
