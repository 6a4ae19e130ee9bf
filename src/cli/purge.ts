import { IdempotencyPurgeService } from 'safe-retries';
import { EventsPurgeJob, describePurge } from '../events/retention/events-purge.job';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run purge`: one purge now, then exit (e.g. from an external scheduler,
 * or after a long outage): of expired idempotency keys and processed
 * messages, then of events, delivery attempts and webhook dead letters past
 * their retention. Each takes the same advisory lock as its scheduled job, so
 * it is safe next to running instances: when one of them is purging, its line
 * says so, and the command exits 0. Messages are named only when some were deleted.
 */
runWithAppContext('purge', async (context) => {
  const keys = await context.get(IdempotencyPurgeService).purgeOnce();
  const messages = keys.messages > 0 ? ` and ${keys.messages} processed messages` : '';
  console.log(
    keys.skipped
      ? 'skipped: another instance holds the purge lock'
      : `purged ${keys.deleted} expired idempotency keys${messages} in ${keys.durationMs} ms`,
  );
  const events = await context.get(EventsPurgeJob).purgeOnce();
  console.log(events.skipped ? 'skipped: another instance holds the events purge lock' : `purged ${describePurge(events)}`);
});
