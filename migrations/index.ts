import { idempotencyMigrations } from 'safe-retries/migrations';
import { CreateClients1764460800000 } from './1764460800000-CreateClients';
import { CreateOrdersPaymentsRefunds1764460800002 } from './1764460800002-CreateOrdersPaymentsRefunds';
import { PaymentPhases1764460800003 } from './1764460800003-PaymentPhases';
import { ClientKeys1796076397978 } from './1796076397978-ClientKeys';
import { PaymentOperationKeys1796200000000 } from './1796200000000-PaymentOperationKeys';
import { RefundStates1796300000000 } from './1796300000000-RefundStates';
import { OperationAttention1796400000000 } from './1796400000000-OperationAttention';
import { ClientWebhooks1796600000000 } from './1796600000000-ClientWebhooks';
import { AttentionNetworkWord1797300000000 } from './1797300000000-AttentionNetworkWord';
import { RefundSettlementCursor1797400000000 } from './1797400000000-RefundSettlementCursor';
import { WebhookAttempts1797500000000 } from './1797500000000-WebhookAttempts';
import { WebhookRetries1797600000000 } from './1797600000000-WebhookRetries';
import { WebhookSecretOverlap1797700000000 } from './1797700000000-WebhookSecretOverlap';
import { EventsRetention1797800000000 } from './1797800000000-EventsRetention';
import { WebhookSecretVersion1797960000000 } from './1797960000000-WebhookSecretVersion';
import { OutboxEventIndexOwnPredicate1798100000000 } from './1798100000000-OutboxEventIndexOwnPredicate';

const [createIdempotencyKeys, idempotencyKeysRecovery, idempotencyKeysAnyScope, idempotencyKeysHashed, createIdempotencyMessages, createIdempotencyOutbox, idempotencyOutboxLanes, idempotencyOutboxLaneGroups, idempotencyOutboxLaneIndex, idempotencyOutboxDueIndexDropped] =
  idempotencyMigrations();

/**
 * Every migration, in order: the app's and the idempotency module's (which
 * ships its own, under the names this service first applied them with). The
 * data source gets classes, not a glob (TypeORM 1.x loads globs with import(),
 * which fails inside jest). `npm run migration:generate -- Name` writes a new
 * file; add it here.
 */
export const migrations = [
  CreateClients1764460800000,
  createIdempotencyKeys,
  CreateOrdersPaymentsRefunds1764460800002,
  PaymentPhases1764460800003,
  idempotencyKeysRecovery,
  idempotencyKeysAnyScope,
  ClientKeys1796076397978,
  idempotencyKeysHashed,
  createIdempotencyMessages,
  PaymentOperationKeys1796200000000,
  RefundStates1796300000000,
  OperationAttention1796400000000,
  createIdempotencyOutbox,
  ClientWebhooks1796600000000,
  AttentionNetworkWord1797300000000,
  RefundSettlementCursor1797400000000,
  WebhookAttempts1797500000000,
  WebhookRetries1797600000000,
  WebhookSecretOverlap1797700000000,
  EventsRetention1797800000000,
  WebhookSecretVersion1797960000000,
  idempotencyOutboxLanes,
  idempotencyOutboxLaneGroups,
  idempotencyOutboxLaneIndex,
  idempotencyOutboxDueIndexDropped,
  OutboxEventIndexOwnPredicate1798100000000,
];
