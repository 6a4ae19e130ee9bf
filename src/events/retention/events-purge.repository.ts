import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../../database/sql-repository';
import { WEBHOOK_DELIVERY_TOPIC } from '../webhook-delivery.port';

/**
 * The purge's batches, one autocommit statement each: $1 rows at most, past
 * $2 ms of retention on the database's clock. Each picks its rows oldest first
 * through an index (migration EventsRetention) and locks them FOR UPDATE SKIP
 * LOCKED: a row another purge, a delivery or a redelivery holds right now is
 * left for a later run, never waited for, and two batches at once never take
 * the same row. The DELETE repeats the rule on the row it deletes, so a row
 * that changed since it was picked (a dead letter replayed) stays.
 */
const PAST = (column: string) => `${column} <= now() - $2::int8 * interval '1 millisecond'`;

const counted = (doomed: string, remove: string) => `
WITH doomed AS (${doomed}),
     gone AS (${remove} RETURNING 1)
SELECT count(*)::int AS deleted FROM gone`;

// An attempt's outcome is its finish; one cut short (its process stopped) ended
// within the outbox's lease of its start.
const ATTEMPT_ENDED = 'coalesce(d.finished_at, d.created_at)';
const ATTEMPTS = counted(
  `SELECT d.client_id, d.id FROM webhook_deliveries d
    WHERE ${PAST(ATTEMPT_ENDED)}
    ORDER BY ${ATTEMPT_ENDED}
    LIMIT $1
      FOR UPDATE SKIP LOCKED`,
  `DELETE FROM webhook_deliveries d USING doomed
    WHERE d.client_id = doomed.client_id AND d.id = doomed.id AND ${PAST(ATTEMPT_ENDED)}`,
);

// Webhook deliveries parked past the outbox's horizon, counted from their death.
const DEAD_LETTERS = counted(
  `SELECT o.id FROM idempotency_outbox o
    WHERE ${PAST('o.dead_at')} AND o.topic = $3
    ORDER BY o.dead_at
    LIMIT $1
      FOR UPDATE SKIP LOCKED`,
  `DELETE FROM idempotency_outbox o USING doomed
    WHERE o.id = doomed.id AND ${PAST('o.dead_at')} AND o.topic = $3`,
);

// An event goes once nothing more of it is kept: no attempt (each kept for the
// retention from its own end), and no delivery waiting or dead (a dead letter
// is kept for the retention from its death, and can be replayed until then).
// The one gap is a redelivery of an event already past all of that, committed
// while this statement runs: its delivery then finds no event and resolves
// unsent, as a redelivery asked a moment later gets 404.
const EVENT_UNREFERENCED = `
      NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.client_id = e.client_id AND d.event_id = e.id)
  AND NOT EXISTS (SELECT 1 FROM idempotency_outbox o
                   WHERE o.delivered_at IS NULL AND (o.payload->>'eventId') = e.id
                     AND o.topic = $3 AND (o.payload->>'clientId') = e.client_id::text)`;
const EVENTS = counted(
  `SELECT e.client_id, e.id FROM events e
    WHERE ${PAST('e.created_at')} AND ${EVENT_UNREFERENCED}
    ORDER BY e.created_at
    LIMIT $1
      FOR UPDATE SKIP LOCKED`,
  `DELETE FROM events e USING doomed
    WHERE e.client_id = doomed.client_id AND e.id = doomed.id AND ${PAST('e.created_at')} AND ${EVENT_UNREFERENCED}`,
);

/** What one batch of each kind deletes. */
export type PurgedKind = 'attempts' | 'deadLetters' | 'events';

const BATCHES: Record<PurgedKind, string> = { attempts: ATTEMPTS, deadLetters: DEAD_LETTERS, events: EVENTS };

/** The events' purge statements (see EventsPurgeJob); each runs outside any transaction, on the pool. */
@Injectable()
export class EventsPurgeRepository extends SqlRepository {
  /** Deletes one batch of `kind` past `retentionMs`: how many rows went. */
  async purgeBatch(kind: PurgedKind, batchSize: number, retentionMs: number): Promise<number> {
    const params = kind === 'attempts' ? [batchSize, retentionMs] : [batchSize, retentionMs, WEBHOOK_DELIVERY_TOPIC];
    const [{ deleted }] = await this.rows<{ deleted: number }>(BATCHES[kind], params);
    return deleted;
  }
}
