import type { Pool, PoolClient } from 'pg';
import { Percentiles, round, summarize } from './stats';

/** How a pg pool was used while a PoolMeter measured it. */
export interface PoolUse {
  size: number;
  /** Connections handed out a second. */
  acquiredPerSecond: number;
  /** Requests waiting for a connection, sampled every 10 ms: mean and max. */
  waiting: { mean: number; max: number };
  /** The mean wait for a connection (Little's law: mean waiting / acquisitions a second), ms. */
  meanWaitMs: number;
  /** How long a connection was held, from its hand-out to its release, ms. */
  holdMs: Percentiles;
}

/**
 * Measures a pg Pool through its documented surface: its `acquire` and
 * `release` events and its `waitingCount`.
 */
export class PoolMeter {
  private readonly since = new WeakMap<PoolClient, number>();
  private holds: number[] = [];
  private acquired = 0;
  private samples = 0;
  private waitingSum = 0;
  private waitingMax = 0;
  private started = 0;
  private sampler?: NodeJS.Timeout;

  constructor(
    private readonly pool: Pool,
    private readonly size: number,
  ) {
    pool.on('acquire', (client) => {
      this.acquired++;
      this.since.set(client, performance.now());
    });
    pool.on('release', (_error, client) => {
      const at = this.since.get(client);
      if (at !== undefined) this.holds.push(performance.now() - at);
    });
  }

  start(): void {
    this.holds = [];
    this.acquired = 0;
    this.samples = 0;
    this.waitingSum = 0;
    this.waitingMax = 0;
    this.started = performance.now();
    this.sampler = setInterval(() => {
      this.samples++;
      this.waitingSum += this.pool.waitingCount;
      this.waitingMax = Math.max(this.waitingMax, this.pool.waitingCount);
    }, 10);
  }

  stop(): PoolUse {
    clearInterval(this.sampler);
    const seconds = (performance.now() - this.started) / 1000;
    const perSecond = this.acquired / seconds;
    const meanWaiting = this.waitingSum / Math.max(this.samples, 1);
    return {
      size: this.size,
      acquiredPerSecond: round(perSecond, 1),
      waiting: { mean: round(meanWaiting, 2), max: this.waitingMax },
      meanWaitMs: round(perSecond > 0 ? (meanWaiting / perSecond) * 1000 : 0, 1),
      holdMs: summarize(this.holds),
    };
  }
}
