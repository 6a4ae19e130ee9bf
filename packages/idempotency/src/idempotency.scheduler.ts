import { SchedulerRegistry } from '@nestjs/schedule';
import { ResolvedIdempotencyOptions } from './idempotency.options';

/**
 * The module's jobs (the purge's cron, the recovery's interval) live in the
 * app's SchedulerRegistry, next to the app's own: the app imports
 * `ScheduleModule.forRoot()` once, and whatever it does with its jobs
 * (list them, stop them, its shutdown) applies to these too. The module never
 * imports ScheduleModule itself, so it never registers a second scheduler.
 */

/** The SchedulerRegistry the module's jobs are added to; undefined when no job is enabled. */
export const IDEMPOTENCY_SCHEDULER = Symbol('IDEMPOTENCY_SCHEDULER');

/** What an app must import when a job is enabled, said once, at startup. */
export function missingScheduler(jobs: string[]): string {
  return (
    `IdempotencyModule schedules its ${jobs.join(' and ')} through @nestjs/schedule, and the app has not registered it: ` +
    "import ScheduleModule.forRoot() from '@nestjs/schedule' in the app's root module, or set " +
    jobs.map((job) => `${job}: { enabled: false }`).join(' and ') +
    ' in the IdempotencyModule options'
  );
}

/** The app's SchedulerRegistry when a job needs it; a clear startup error when it is not registered. */
export function idempotencyScheduler(options: ResolvedIdempotencyOptions, registry: SchedulerRegistry | undefined): SchedulerRegistry | undefined {
  const jobs = [...(options.purge.enabled ? ['purge'] : []), ...(options.recovery.enabled ? ['recovery'] : [])];
  if (jobs.length === 0) return undefined;
  if (registry === undefined) throw new Error(missingScheduler(jobs));
  return registry;
}
