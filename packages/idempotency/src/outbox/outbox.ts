import { Inject, Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { InjectDataSource } from '@nestjs/typeorm';
import type { PoolClient } from 'pg';
import { DataSource } from 'typeorm';
import { IDEMPOTENCY_OPTIONS, IDEMPOTENCY_TX_HOST, ResolvedIdempotencyOptions } from '../config/idempotency.options';
import { DeadLetter } from '../contract/outbox-message';
import { OutboxStatements, outboxStatements } from './outbox-statements';

/** What `Outbox.add` takes (one, or a list). */
export interface OutboxEntry {
  /** What the message is about (`order.confirmed`): the publisher routes by it. */
  topic: string;
  /** Any JSON value. */
  payload: unknown;
  /** Messages of one stream (e.g. one payment's id) are delivered one at a time, in the order they were added. */
  stream?: string;
  /**
   * The destination it shares with others (one receiver's endpoint): a relay
   * has at most 4 messages of a lane in flight at once (RELAY_LANE_CAP), and
   * claims across lanes in turn, so a slow lane delays only its own messages.
   */
  lane?: string;
  /**
   * The party its lane belongs to (one tenant, whose destinations are its
   * lanes); only with a lane, and the same for every message of the lane. A
   * relay has at most 20 messages of a group in flight (RELAY_GROUP_CAP,
   * half its slots), and gives a free slot to the group with the fewest in
   * flight before the lane with the fewest: a party with many lanes takes no
   * more than a party with one. Without it, a lane is a group of its own.
   */
  group?: string;
}

/** An entry's payload as JSON text; throws TypeError for an entry `Outbox.add` cannot take. */
function checked(entry: OutboxEntry): string {
  if (typeof entry.topic !== 'string' || entry.topic.length === 0) throw new TypeError('Outbox.add: topic must be a non-empty string');
  if (entry.stream !== undefined && (typeof entry.stream !== 'string' || entry.stream.length === 0)) {
    throw new TypeError('Outbox.add: stream must be a non-empty string when given');
  }
  if (entry.lane !== undefined && (typeof entry.lane !== 'string' || entry.lane.length === 0)) {
    throw new TypeError('Outbox.add: lane must be a non-empty string when given');
  }
  if (entry.group !== undefined && (typeof entry.group !== 'string' || entry.group.length === 0 || entry.lane === undefined)) {
    throw new TypeError('Outbox.add: group must be a non-empty string, given with a lane');
  }
  const payload = JSON.stringify(entry.payload);
  if (payload === undefined) throw new TypeError('Outbox.add: payload must be a JSON value');
  return payload;
}

/** `Outbox.add` called with no transaction to join. */
export class OutboxOutsideTransactionError extends Error {
  constructor() {
    super(
      'Outbox.add: no transaction is active, so the message would not commit with the effect it announces. Call it inside ' +
        'an @Idempotent() route on the PostgreSQL store (any commit mode), a phase of a phased operation, ' +
        'IdempotentConsumer.process, or a transaction of TransactionHost.',
    );
    this.name = 'OutboxOutsideTransactionError';
  }
}

/**
 * The transactional outbox: a message added here is a row written in the
 * caller's transaction (the one TransactionHost holds, the key's), so it
 * commits with the key and the business write, or rolls back with them. It
 * exists exactly when the effect does; OutboxRelay delivers it, at least once.
 */
@Injectable()
export class Outbox {
  private readonly sql: OutboxStatements;
  private readonly channel: string;
  /** The add's name when statements are prepared (planned once per connection, not on every add). */
  private readonly addName?: string;

  constructor(
    @Inject(IDEMPOTENCY_TX_HOST) private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    @Inject(IDEMPOTENCY_OPTIONS) options: ResolvedIdempotencyOptions,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {
    this.sql = outboxStatements(options.outbox.table.sql);
    this.channel = options.outbox.channel;
    if (options.postgres.preparedStatements) this.addName = 'safe_retries_outbox_add';
  }

  /**
   * Adds a message in the active transaction and answers its id (a UUID, the
   * downstream idempotency key). Given a list, adds every message in one
   * statement (a fan-out costs one round trip, whatever its size) and answers
   * their ids in the list's order; messages of one stream in a list are
   * delivered in the list's order. Throws OutboxOutsideTransactionError when
   * no transaction is active: a message must never commit without its effect.
   */
  add(entry: OutboxEntry): Promise<string>;
  add(entries: readonly OutboxEntry[]): Promise<string[]>;
  async add(given: OutboxEntry | readonly OutboxEntry[]): Promise<string | string[]> {
    const list = Array.isArray(given);
    const entries = (list ? given : [given]) as readonly OutboxEntry[];
    const payloads = entries.map(checked);
    if (!this.txHost.isTransactionActive()) throw new OutboxOutsideTransactionError();
    if (entries.length === 0) return [];
    // On the transaction's own pg client (TypeORM's `QueryRunner.connect()`), so the statement can be prepared.
    const runner = this.txHost.tx.queryRunner;
    if (!runner) throw new Error('the ambient transaction has no query runner');
    const client = (await runner.connect()) as PoolClient;
    const values = [entries.map((e) => e.topic), payloads, entries.map((e) => e.stream ?? null), entries.map((e) => e.lane ?? null), entries.map((e) => e.group ?? null), this.channel];
    const { rows } = await client.query<{ id: string }>(this.addName ? { name: this.addName, text: this.sql.add, values } : { text: this.sql.add, values });
    const ids = rows.map((r) => r.id);
    return list ? ids : ids[0];
  }

  /** Messages parked past their horizon, oldest first (at most `limit`). */
  async deadLetters(limit = 100): Promise<DeadLetter[]> {
    return (await this.dataSource.query(this.sql.deadLetters, [limit])) as DeadLetter[];
  }

  /**
   * Delivers dead letters again: each is due at once, its horizon counted
   * from now. Answers the ids that were dead (others are ignored).
   */
  async replay(ids: string[]): Promise<string[]> {
    const rows = (await this.dataSource.query(this.sql.replay, [ids, this.channel])) as { id: string }[];
    return rows.map((r) => r.id);
  }
}
