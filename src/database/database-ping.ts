import { OnModuleDestroy } from '@nestjs/common';
import { Pool } from 'pg';

/** A database that has not answered the ping by then is down. */
export const PING_TIMEOUT_MS = 1_500;

/**
 * The database check of GET /health, on a connection of its own (a pool of
 * one, to the primary's URL as the app reaches it, through a pooler when there
 * is one). On the app's pool the check would wait for a free connection behind
 * every statement of a busy moment, and a busy instance would look like a dead
 * database. Its own connection still answers only while the database does: a
 * refused or broken connection, or a ping that takes longer than
 * PING_TIMEOUT_MS, is a failed check.
 */
export class DatabasePing implements OnModuleDestroy {
  private readonly pool: Pool;

  constructor(url: string) {
    this.pool = new Pool({
      connectionString: url,
      max: 1,
      connectionTimeoutMillis: PING_TIMEOUT_MS,
      query_timeout: PING_TIMEOUT_MS,
      keepAlive: true,
      application_name: 'safe-retries-health',
    });
    // An idle connection the server ended (a restart, a terminated backend) is
    // dropped by the pool; the next ping connects anew and reports what it finds.
    this.pool.on('error', () => undefined);
  }

  /** Resolves when the database answers `SELECT 1`; rejects when it does not. */
  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async onModuleDestroy(): Promise<void> {
    await this.pool.end();
  }
}
