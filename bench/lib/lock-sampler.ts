import { Client } from 'pg';

/**
 * Samples, from a connection of its own, how many backends of the bench
 * database wait on a heavyweight lock (row locks, a transaction's xid) as fast
 * as it can: pg_stat_activity.wait_event_type = 'Lock', and ungranted pg_locks.
 */
export interface LockSample {
  samples: number;
  maxLockWaiters: number;
  maxUngrantedLocks: number;
}

const SQL = `
SELECT (SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock')::int AS waiters,
       (SELECT count(*) FROM pg_locks WHERE NOT granted)::int AS ungranted`;

export class LockSampler {
  private running = false;
  private loop?: Promise<LockSample>;

  private constructor(private readonly client: Client) {}

  static async open(url: string): Promise<LockSampler> {
    const client = new Client({ connectionString: url, application_name: 'bench-lock-sampler' });
    await client.connect();
    return new LockSampler(client);
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      const s: LockSample = { samples: 0, maxLockWaiters: 0, maxUngrantedLocks: 0 };
      while (this.running) {
        const { rows } = await this.client.query<{ waiters: number; ungranted: number }>(SQL);
        s.samples += 1;
        s.maxLockWaiters = Math.max(s.maxLockWaiters, rows[0].waiters);
        s.maxUngrantedLocks = Math.max(s.maxUngrantedLocks, rows[0].ungranted);
      }
      return s;
    })();
  }

  async stop(): Promise<LockSample> {
    this.running = false;
    const result = await this.loop!;
    this.loop = undefined;
    return result;
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}
