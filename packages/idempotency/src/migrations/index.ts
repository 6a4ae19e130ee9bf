import { MigrationInterface } from 'typeorm';
import { DEFAULT_TABLE_NAME, idempotencyTable } from '../config/idempotency-table';
import { DEFAULT_MESSAGES_TABLE_NAME, messagesTable } from '../config/idempotency-messages-table';
import { createIdempotencyKeys } from './1764460800001-CreateIdempotencyKeys';
import { idempotencyKeysRecovery } from './1764460800004-IdempotencyKeysRecovery';
import { idempotencyKeysAnyScope } from './1764460800005-IdempotencyKeysAnyScope';
import { idempotencyKeysHashed } from './1796081151558-IdempotencyKeysHashed';
import { createIdempotencyMessages } from './1796142644217-CreateIdempotencyMessages';
import { createIdempotencyOutbox } from './1796500000000-CreateIdempotencyOutbox';
import { idempotencyOutboxLanes } from './1798000000000-IdempotencyOutboxLanes';
import { idempotencyOutboxLaneGroups } from './1798000000001-IdempotencyOutboxLaneGroups';
import { idempotencyOutboxLaneIndex } from './1798000000002-IdempotencyOutboxLaneIndex';
import { idempotencyOutboxDueIndexDropped } from './1798000000003-IdempotencyOutboxDueIndexDropped';
import { DEFAULT_OUTBOX_TABLE_NAME } from '../config/idempotency-table';

export type IdempotencyMigration = new () => MigrationInterface;

/**
 * The module's migrations, in order, for a keys table named `tableName` and a
 * processed-messages table named `messagesTableName` (the same as
 * `IdempotencyModule.forRoot({ postgres: { tableName }, messages: { tableName } })`). Add them to the data source's
 * `migrations` among the app's own; their names (and timestamps) never change,
 * so a database that has run one never runs it again. For a database managed
 * without TypeORM migrations, sql/idempotency-keys.sql is the keys table's
 * schema; the messages table is the one CREATE TABLE and index of
 * CreateIdempotencyMessages; the outbox's table, `idempotency_outbox`, the
 * CREATE TABLE and indexes of CreateIdempotencyOutbox but `due_idx`
 * (IdempotencyOutboxDueIndexDropped), the columns of IdempotencyOutboxLanes and
 * IdempotencyOutboxLaneGroups and the index of IdempotencyOutboxLaneIndex.
 */
export function idempotencyMigrations(
  tableName: string = DEFAULT_TABLE_NAME,
  messagesTableName: string = DEFAULT_MESSAGES_TABLE_NAME,
): IdempotencyMigration[] {
  const table = idempotencyTable(tableName);
  return [
    createIdempotencyKeys(table),
    idempotencyKeysRecovery(table),
    idempotencyKeysAnyScope(table),
    idempotencyKeysHashed(table),
    createIdempotencyMessages(messagesTable(messagesTableName)),
    createIdempotencyOutbox(idempotencyTable(DEFAULT_OUTBOX_TABLE_NAME)),
    idempotencyOutboxLanes(idempotencyTable(DEFAULT_OUTBOX_TABLE_NAME)),
    idempotencyOutboxLaneGroups(idempotencyTable(DEFAULT_OUTBOX_TABLE_NAME)),
    idempotencyOutboxLaneIndex(idempotencyTable(DEFAULT_OUTBOX_TABLE_NAME)),
    idempotencyOutboxDueIndexDropped(idempotencyTable(DEFAULT_OUTBOX_TABLE_NAME)),
  ];
}

export { idempotencyKeyEntity } from '../stores/postgres/idempotency-key.entity';
