import { IdempotencyPurgeService } from 'safe-retries';
import { runWithAppContext } from './with-app-context';

/**
 * `npm run purge`: one purge of expired idempotency keys and processed
 * messages, now, then exit (e.g. from an external scheduler, or after a long
 * outage). It takes the same advisory lock as the scheduled job, so it is safe
 * next to running instances: when one of them is purging, this run reports so
 * and exits 0. Messages are named only when some were deleted.
 */
runWithAppContext('purge', async (context) => {
  const result = await context.get(IdempotencyPurgeService).purgeOnce();
  const messages = result.messages > 0 ? ` and ${result.messages} processed messages` : '';
  console.log(
    result.skipped
      ? 'skipped: another instance holds the purge lock'
      : `purged ${result.deleted} expired idempotency keys${messages} in ${result.durationMs} ms`,
  );
});
