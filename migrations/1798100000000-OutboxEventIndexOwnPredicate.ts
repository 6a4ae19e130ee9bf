import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outbox's undelivered messages by the event they deliver (the events'
 * purge) hold only messages that name an event: a predicate the relay's
 * claim never implies. With `delivered_at IS NULL` alone, the claim could use
 * this index, and while PostgreSQL's statistics count almost nothing waiting
 * (a burst before autovacuum sees it), planned each lane's probe on it: a scan
 * of every waiting message per lane.
 */
export class OutboxEventIndexOwnPredicate1798100000000 implements MigrationInterface {
  name = 'OutboxEventIndexOwnPredicate1798100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX outbox_undelivered_event_idx');
    await q.query(
      `CREATE INDEX outbox_undelivered_event_idx ON idempotency_outbox ((payload->>'eventId')) WHERE delivered_at IS NULL AND (payload->>'eventId') IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query('DROP INDEX outbox_undelivered_event_idx');
    await q.query(`CREATE INDEX outbox_undelivered_event_idx ON idempotency_outbox ((payload->>'eventId')) WHERE delivered_at IS NULL`);
  }
}
