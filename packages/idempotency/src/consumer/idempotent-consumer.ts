import { Inject, Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { IdempotencyMetrics } from '../telemetry/idempotency.metrics';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions } from '../config/idempotency.options';

/**
 * The idempotent consumer: a message that may be delivered more than once (a
 * provider's webhook event, a queue message) has its effect committed at most
 * once per (source, message id).
 *
 * The invariant is "effect implies record, record implies effect": the claim of
 * the message id and the effect commit in one transaction or not at all. So a
 * crash or an error in the effect leaves no record (a redelivery processes the
 * message), and a committed record always has its effect. Recording the id
 * after the effect in a second transaction, or checking for it before, leaves
 * windows in which a redelivery runs the effect twice.
 */

/** What `IdempotentConsumer.process` answers: the effect's result, or that the message had been processed. */
export type ConsumedMessage<T> = { processed: true; result: T } | { processed: false };

/** The longest source and message id, in characters (a provider's event id is far shorter). */
export const MAX_MESSAGE_ID_LENGTH = 255;

/** A source or message id that cannot be recorded: a mistake of the caller, or a malformed message. */
export class InvalidMessageIdError extends Error {
  constructor(
    /** Which argument was refused. */
    readonly field: 'source' | 'messageId',
    reason: string,
  ) {
    super(`IdempotentConsumer: the ${field} ${reason}; it must be a non-empty string of at most ${MAX_MESSAGE_ID_LENGTH} characters without NUL`);
    this.name = 'InvalidMessageIdError';
  }
}

function checkId(field: 'source' | 'messageId', value: unknown): void {
  if (typeof value !== 'string') throw new InvalidMessageIdError(field, `is ${value === null ? 'null' : typeof value}, not a string`);
  if (value.length === 0) throw new InvalidMessageIdError(field, 'is empty');
  if (value.length > MAX_MESSAGE_ID_LENGTH) throw new InvalidMessageIdError(field, `has ${value.length} characters`);
  // PostgreSQL's text cannot hold NUL: refused here with a clear error rather than by the driver.
  if (value.includes('\0')) throw new InvalidMessageIdError(field, 'contains a NUL character');
}

@Injectable()
export class IdempotentConsumer {
  private readonly claimSql: string;
  private readonly retentionMs: number;

  constructor(
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
    private readonly metrics: IdempotencyMetrics,
  ) {
    // Retention on the database clock, like the keys'. DO NOTHING: a processed
    // message answers no row, and no row is locked or rewritten.
    this.claimSql = `INSERT INTO ${options.messages.table.sql} (source, message_id, expires_at)
      VALUES ($1, $2, now() + $3::int8 * interval '1 millisecond')
      ON CONFLICT (source, message_id) DO NOTHING RETURNING 1 AS claimed`;
    this.retentionMs = options.messages.retentionMs;
  }

  /**
   * Runs `effect` once per (`source`, `messageId`), in the same transaction as
   * the record that the message was processed: the ambient transaction
   * (TransactionHost) when one is active, else one opened for this call.
   *
   * - First delivery: the message id is claimed, `effect` runs, and both commit
   *   together: `{ processed: true, result }`.
   * - Already processed (within `messages.retention`): `{ processed: false }`,
   *   `effect` is not called. Answer the sender as for a success (a webhook's
   *   2xx, a queue's ack).
   * - `effect` throws: the transaction rolls back, the claim with it, and the
   *   error is rethrown; a redelivery processes the message again. Inside a
   *   transaction of the caller's, the caller's rollback undoes the claim too.
   * - A concurrent duplicate (the same message delivered twice at once) waits
   *   on the primary key for the first transaction to end: if it commits, the
   *   duplicate answers `{ processed: false }`; if it rolls back, the duplicate
   *   processes the message. It never runs the effect alongside the first, and
   *   never answers `{ processed: false }` for an effect that did not commit. The wait
   *   holds the duplicate's connection for as long as the first effect runs,
   *   which is right for a consumer (the sender waits for its acknowledgement).
   *   Under REPEATABLE READ or SERIALIZABLE, PostgreSQL answers that duplicate
   *   with a serialization failure (40001) instead: retry it.
   *
   * `source` names the sender (`'card-network'`, a queue's name) so that two
   * senders' ids never collide; `source` and `messageId` are non-empty strings
   * of at most 255 characters without NUL (InvalidMessageIdError otherwise).
   */
  async process<T>(source: string, messageId: string, effect: () => Promise<T>): Promise<ConsumedMessage<T>> {
    checkId('source', source);
    checkId('messageId', messageId);
    const consumed = await this.txHost.withTransaction(async (): Promise<ConsumedMessage<T>> => {
      const claimed = (await this.txHost.tx.query(this.claimSql, [source, messageId, this.retentionMs])) as unknown[];
      if (claimed.length === 0) return { processed: false };
      return { processed: true, result: await effect() };
    });
    this.metrics.messages.inc({ result: consumed.processed ? 'processed' : 'duplicate' });
    return consumed;
  }
}
