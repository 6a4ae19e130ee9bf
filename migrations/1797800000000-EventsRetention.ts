import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What the events' purge (EventsPurgeJob) reads, oldest first, so each of its
 * batches is cheap however much is kept: events by creation, delivery
 * attempts by their end (a finish, or the start of one cut short), webhook
 * dead letters by their death. And the outbox's undelivered messages by the
 * event they deliver: an event with a delivery waiting or dead is kept. The
 * two outbox indexes are partial: delivered messages, the bulk of the table,
 * are in neither.
 */
export class EventsRetention1797800000000 implements MigrationInterface {
  name = 'EventsRetention1797800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('CREATE INDEX events_created_at_idx ON events (created_at)');
    await q.query('CREATE INDEX webhook_deliveries_ended_idx ON webhook_deliveries ((coalesce(finished_at, created_at)))');
    await q.query(`CREATE INDEX outbox_undelivered_event_idx ON idempotency_outbox ((payload->>'eventId')) WHERE delivered_at IS NULL`);
    await q.query('CREATE INDEX outbox_dead_at_idx ON idempotency_outbox (dead_at) WHERE dead_at IS NOT NULL');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX outbox_dead_at_idx');
    await q.query('DROP INDEX outbox_undelivered_event_idx');
    await q.query('DROP INDEX webhook_deliveries_ended_idx');
    await q.query('DROP INDEX events_created_at_idx');
  }
}
