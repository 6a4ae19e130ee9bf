import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import type { PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_OPTIONS, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { primaryClientConfig } from '../stores/postgres/claim-pool';
import { OutboxMarks } from './outbox-marks';
import { OutboxMetrics } from './outbox-metrics';
import { OutboxMessage, OutboxPublisher } from '../contract/outbox-message';
import { ClaimAnswer, OutboxMessageRow, OutboxStatements, outboxStatements } from './outbox-statements';
import { deliveryLease } from './delivery-lease';
import { OutboxWakeups, sleep } from './outbox-wakeups';
import { Turns } from './turns';

/** Deliveries a relay has in flight at once: its slots (a claim takes those freed while the last one ran). */
export const RELAY_SLOTS = 40;
/** Deliveries of one lane (OutboxEntry.lane) a relay has in flight at once. */
export const RELAY_LANE_CAP = 4;
/**
 * Deliveries of one group of lanes (OutboxEntry.group) a relay has in flight
 * at once: half its slots, so a group alone never leaves the others none.
 */
export const RELAY_GROUP_CAP = RELAY_SLOTS / 2;
/**
 * Connections of the data source's pool the relay's own statements (the claim,
 * the marks) hold at once: its deliveries' marks take turns among themselves, so the
 * relay never holds the pool that requests need (the publisher's own
 * statements are the publisher's to bound).
 */
export const RELAY_CONNECTIONS = 2;
/** How often an idle relay looks for due messages: with a listener (a safety net), and without one. */
export const RELAY_POLL_MS = { listening: 5_000, polling: 1_000 } as const;

const tracer = trace.getTracer('safe-retries');

/**
 * The outbox's relay: delivers committed messages through the registered
 * publisher, at least once. Every instance runs one; they share the work.
 *
 * - Slots. A relay has at most RELAY_SLOTS deliveries in flight (a slot frees
 *   when the publisher answers, or at twice the lease; the outcome's mark follows
 *   outside the slot), and claims again when a slot frees, a message is added, or its poll comes: no
 *   delivery waits for another to end. One claim statement at a
 *   time, and at most RELAY_LANE_CAP deliveries of a lane and
 *   RELAY_GROUP_CAP of a group of lanes: a lane whose receiver is slow holds
 *   no more than that of the slots, a group of such lanes no more than half,
 *   and the claim gives a free slot to the group with the fewest in flight,
 *   then to its lane with the fewest (outbox-statements.ts), so a backlog
 *   delays only its own lane, and a group's many lanes only its own group.
 * - Claim. One autocommit statement takes due messages for the free slots
 *   with FOR UPDATE SKIP LOCKED (relays never wait on each other)
 *   and pushes each one's next_attempt_at to the end of a lease (`outbox.lease`,
 *   on the database clock): while it runs, no other relay takes the message.
 *   No transaction stays open while the publisher works, and nothing relies
 *   on a session, so it runs through a transaction pooler.
 * - Deliver. The publisher gets the message (its id is the downstream
 *   idempotency key) and an AbortSignal that fires at the lease's end; one
 *   lease later the delivery fails if it has not answered (delivery-lease.ts). Its success marks the message
 *   delivered (the deliveries that end while a mark is written are marked
 *   together by the next: one statement for many on a busy relay); its failure schedules the next
 *   attempt (when its error asks, after `retryAfterMs`; else backoff.ts) or,
 *   past the horizon, parks it as a dead letter (outbox-marks.ts). Both marks are fenced on the
 *   claim (its attempt count), so a relay that outlived its lease cannot
 *   reschedule a message another relay holds.
 * - At least once. A relay killed after the publisher's send and before the
 *   mark leaves the message claimed: when the lease ends another relay sends
 *   it again, under the same id, and the receiver deduplicates.
 * - Streams. A message with a stream is due only when every older message of
 *   its stream is delivered: one in flight per stream, in order, and a dead
 *   letter holds its stream until it is replayed.
 * - Wake-ups. NOTIFY at the commit of an added message wakes the relay
 *   (OutboxWakeups); it also looks every few seconds (RELAY_POLL_MS), every
 *   second while no listener is connected: all it does behind a transaction
 *   pooler without `postgres.listenUrl`, and until a lost listener is back. A claim that
 *   picked fewer than it asked for left due only messages held back by a
 *   full cap: while the relay listens, only a NOTIFY or time makes others
 *   due, so a delivery's end claims again only if it failed, was of a
 *   stream (the next of its stream is due; both once the mark is written),
 *   or frees a lane or group at its cap; the relay claims again when the next waiting
 *   message comes due (a retry, a lease's end: the claim answers when), or
 *   at its poll if sooner. A slot that frees during a claim claims again.
 */
@Injectable()
export class OutboxRelay implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('IdempotencyOutbox');
  private readonly sql: OutboxStatements;
  /** Each statement's name, when prepared. */
  private readonly names: Map<string, string>;
  private readonly publish?: OutboxPublisher;
  private wakeups?: OutboxWakeups;
  private loop?: Promise<void>;
  /** Aborted at shutdown: the loop claims no more. */
  private readonly stopping = new AbortController();
  private readonly connections = new Turns(RELAY_CONNECTIONS);
  /** The deliveries in flight: each holds its slot until the publisher answers (at most twice the lease). */
  private inFlight = 0;
  /** The deliveries not ended (their outcome not yet marked): what shutdown waits for. */
  private readonly unfinished = new Set<Promise<void>>();
  /** Deliveries in flight per lane, and per group of lanes. */
  private readonly lanes = new Map<string, number>();
  private readonly groups = new Map<string, number>();
  /** Aborted when a delivery's end may make a message due (the loop claims again) and at shutdown: ends the loop's wait. */
  private freed = new AbortController();
  /**
   * Whether the last claim may have left due messages other than those held
   * back by a full cap (true while a claim runs, and after one failed); and
   * in how many ms the next waiting message comes due (NULL: none waits;
   * after a failed claim, RELAY_POLL_MS.polling: look again).
   */
  private leftMore = true;
  private nextDueMs: number | null = null;
  private readonly marks: OutboxMarks;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(IDEMPOTENCY_OPTIONS) private readonly options: ResolvedIdempotencyOptions,
    private readonly metrics: OutboxMetrics,
  ) {
    this.sql = outboxStatements(options.outbox.table.sql);
    this.names = new Map(Object.entries(this.sql).map(([key, text]) => [text, `safe_retries_outbox_${key}`]));
    this.publish = options.outbox.publish;
    this.marks = new OutboxMarks((sql, params) => this.query(sql, params), this.sql, options.outbox.horizonMs, metrics, this.logger);
  }

  onApplicationBootstrap(): void {
    if (!this.publish || !this.options.outbox.enabled) return;
    const { listen } = this.options.postgres;
    if (listen) this.wakeups = new OutboxWakeups(this.options.outbox.channel, listen.url ? { connectionString: listen.url } : primaryClientConfig(this.dataSource), RELAY_POLL_MS.polling);
    this.loop = this.run();
    this.logger.log(`outbox relay started (${listen ? 'woken by LISTEN/NOTIFY' : 'polling'})`);
  }

  /** Stops claiming, lets the deliveries in flight end before the data source closes, then closes the publisher. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopping.abort();
    this.freed.abort();
    await this.loop;
    await Promise.all(this.unfinished);
    await this.wakeups?.stop();
    this.loop = undefined;
    await this.publish?.close?.().catch((error: unknown) => this.logger.warn(`closing the outbox publisher failed: ${(error as Error).message}`));
  }

  /**
   * Claims due messages for the free slots (none free: claims nothing) and
   * starts their deliveries; answers them, and records what the claim left
   * due (`leftMore`, `nextDueMs`).
   */
  private async claim(): Promise<Promise<void>[]> {
    const publish = this.publish;
    if (!publish) throw new Error('OutboxRelay: no publisher (IdempotencyModule.forRoot({ outbox: { publish } }))');
    const free = RELAY_SLOTS - this.inFlight;
    if (free <= 0) return [];
    this.leftMore = true;
    const [answer] = (await this.query(this.sql.claim, [
      free,
      this.options.outbox.leaseMs,
      [...this.lanes.keys()],
      [...this.lanes.values()],
      RELAY_LANE_CAP,
      [...this.groups.keys()],
      [...this.groups.values()],
      RELAY_GROUP_CAP,
    ])) as ClaimAnswer[];
    this.leftMore = answer.full;
    this.nextDueMs = answer.next_due_ms;
    return answer.messages.map((row) => this.start(publish, row));
  }

  /** A delivery in a slot (and its lane's and group's counts) until the publisher answers (at most twice the lease); it ends once its outcome is marked (or the mark failed). */
  private start(publish: OutboxPublisher, row: OutboxMessageRow): Promise<void> {
    this.inFlight++;
    count(this.lanes, row.lane, 1);
    count(this.groups, row.lane_group, 1);
    const answered = (sent: boolean) => {
      const wakes = this.answerWakes(row, sent);
      this.inFlight--;
      count(this.lanes, row.lane, -1);
      count(this.groups, row.lane_group, -1);
      if (wakes) this.freed.abort();
    };
    // deliver() settles every outcome itself (a failed mark is logged): it never rejects.
    const delivery: Promise<void> = this.deliver(publish, row, answered).then((delivered) => {
      this.unfinished.delete(delivery);
      // A failure's retry, and the next message of a stream, come due with the mark.
      if (!delivered || row.stream !== null) this.freed.abort();
    });
    this.unfinished.add(delivery);
    return delivery;
  }

  /**
   * Whether the publisher's answer (its slot still counted) may leave a
   * message due that the last claim did not take. When that claim took fewer
   * than it asked for, it left only messages held back by full caps, and the
   * relay hears of added messages: only if the answer frees a full lane or
   * group. A failure, or a message of a stream, wakes the relay once marked.
   */
  private answerWakes(row: OutboxMessageRow, sent: boolean): boolean {
    if (this.leftMore) return true;
    if (!sent || row.stream !== null) return false;
    if (!this.wakeups?.listening) return true;
    return (row.lane !== null && this.lanes.get(row.lane) === RELAY_LANE_CAP) || (row.lane_group !== null && this.groups.get(row.lane_group) === RELAY_GROUP_CAP);
  }

  /**
   * One autocommit statement on the primary, in its turn (RELAY_CONNECTIONS),
   * on the pg client of a TypeORM query runner (`QueryRunner.connect()`):
   * prepared (named after the statement) unless `postgres.preparedStatements`
   * is off, so the claim is planned once per connection, not on every run.
   */
  private query(sql: string, params: unknown[]): Promise<unknown[]> {
    return this.connections.run(async () => {
      const runner = this.dataSource.createQueryRunner('master');
      try {
        const client = (await runner.connect()) as PoolClient;
        const name = this.options.postgres.preparedStatements ? this.names.get(sql) : undefined;
        return (await client.query(name ? { name, text: sql, values: params } : { text: sql, values: params })).rows;
      } finally {
        await runner.release();
      }
    });
  }

  /**
   * Claims while slots are free and messages due; then waits for a slot to
   * free, a message to be added, or the poll. Ends at shutdown (the
   * deliveries in flight go on: beforeApplicationShutdown waits for them).
   */
  private async run(): Promise<void> {
    const pollMs = this.wakeups ? RELAY_POLL_MS.listening : RELAY_POLL_MS.polling;
    const { signal } = this.stopping;
    while (!signal.aborted) {
      this.freed = new AbortController();
      const free = RELAY_SLOTS - this.inFlight;
      let more = false;
      if (free > 0) {
        try {
          // As many as asked: more may be due.
          more = (await this.claim()).length === free;
        } catch (error) {
          this.nextDueMs = RELAY_POLL_MS.polling;
          this.logger.error(`outbox relay claim failed: ${(error as Error).message}`);
        }
      }
      if (signal.aborted || (more && this.inFlight < RELAY_SLOTS)) continue;
      // A slot that freed during the claim ends the wait at once.
      const woken = this.freed.signal;
      const waitMs = Math.min(pollMs, this.nextDueMs ?? pollMs);
      if (this.inFlight >= RELAY_SLOTS) await sleep(pollMs, woken);
      else await (this.wakeups ? this.wakeups.sleep(waitMs, woken) : sleep(waitMs, woken));
    }
  }

  /**
   * Delivers a message and marks the outcome; tells `answered` whether the
   * publisher succeeded as soon as it answers (before the mark), and answers
   * whether the message was marked delivered.
   */
  private deliver(publish: OutboxPublisher, row: OutboxMessageRow, answered: (sent: boolean) => void): Promise<boolean> {
    const message: OutboxMessage = { id: row.id, topic: row.topic, payload: row.payload, stream: row.stream, attempt: row.attempts };
    const attributes = { 'outbox.message_id': row.id, 'outbox.topic': row.topic, 'outbox.attempt': row.attempts };
    return tracer.startActiveSpan('idempotency.outbox.publish', { attributes }, async (span) => {
      const lease = deliveryLease(this.options.outbox.leaseMs);
      const started = performance.now();
      let sent = false;
      try {
        // Past twice the lease the delivery fails and frees its slot, whatever a publisher that ignored the signal still does.
        await Promise.race([publish(message, lease.signal), lease.expired]);
        this.metrics.publishDuration.observe((performance.now() - started) / 1000);
        sent = true;
        answered(true);
        await this.marks.delivered(row);
        this.metrics.deliveries.inc({ result: 'delivered' });
        return true;
      } catch (error) {
        if (!sent) {
          this.metrics.publishDuration.observe((performance.now() - started) / 1000);
          answered(false);
        }
        span.recordException(error as Error);
        span.setStatus({ code: SpanStatusCode.ERROR });
        await this.marks.failed(row, error);
        return false;
      } finally {
        lease.end();
        span.end();
      }
    });
  }
}

/** Adds `by` to `key`'s count (none: nothing); a count that falls to 0 is removed. */
function count(counts: Map<string, number>, key: string | null, by: number): void {
  if (key === null) return;
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
