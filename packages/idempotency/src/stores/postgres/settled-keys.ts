import { Logger } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { ClientConfig } from 'pg';
import { ChannelListener } from './channel-listener';

/** A waiter asks the claim again at least this often (a lost notification costs no more). */
const MAX_WAIT_SLICE_MS = 1_000;
/** Without a listener (behind a transaction pooler, no postgres.listenUrl), a waiter asks again this often. */
const POLL_WAIT_SLICE_MS = 250;

/**
 * Waiting duplicates (`@Idempotent({ wait })`) in PostgreSQL. One connection per
 * process LISTENs on one channel (a session of its own: on `postgres.listenUrl` when
 * given, never through a transaction pooler); a settled key is announced with
 * pg_notify, after its completion or release committed, with the key's row id
 * (keyId, a hash) as payload: the key itself never travels. Every waiter also
 * wakes at least once a second and asks the claim again, so a notification lost
 * while the listener reconnects costs at most that second: no polling storm,
 * and no reliance on delivery. A listener that cannot connect or LISTEN (the
 * database restarting, a standby) is tried again at most once a second
 * (ChannelListener), whatever the number of waiters. Without a listener (a transaction pooler and no
 * postgres.listenUrl) waiters only poll, every POLL_WAIT_SLICE_MS, each one primary-key
 * lookup.
 */
export class SettledKeysListener {
  private readonly listener?: ChannelListener;
  private readonly waiters = new Map<string, Set<() => void>>();
  /** The channel of this table's settled keys (an identifier: at most 63 bytes). */
  readonly channel: string;

  /** `listenAt`: where the listener connects, or false: waiters poll. */
  constructor(tableName: string, listenAt: ClientConfig | false) {
    const name = `${tableName}_settled`;
    this.channel = Buffer.byteLength(name) <= 63 ? name : `idempotency_settled_${createHash('sha256').update(name).digest('hex').slice(0, 16)}`;
    if (listenAt) {
      const notification = (id: string) => {
        for (const wake of [...(this.waiters.get(id) ?? [])]) wake();
      };
      this.listener = new ChannelListener('settled keys', this.channel, { ...listenAt, application_name: 'safe-retries-waits' }, MAX_WAIT_SLICE_MS, { notification }, new Logger('Idempotency'));
    }
  }

  /**
   * Resolves when the key `id` is announced settled or after `timeoutMs` (at most a
   * slice of it: the caller asks again), whichever comes first. Registers at
   * once, so a settlement right after the call is not missed.
   */
  awaitSettled(id: string, timeoutMs: number): { settled: Promise<void>; cancel(): void } {
    let wake!: () => void;
    const settled = new Promise<void>((resolve) => (wake = resolve));
    const slice = this.listener ? MAX_WAIT_SLICE_MS : POLL_WAIT_SLICE_MS;
    const timer = setTimeout(() => done(), Math.max(0, Math.min(timeoutMs, slice)));
    const done = () => {
      clearTimeout(timer);
      const set = this.waiters.get(id);
      set?.delete(done);
      if (set?.size === 0) this.waiters.delete(id);
      wake();
    };
    const set = this.waiters.get(id) ?? new Set();
    set.add(done);
    this.waiters.set(id, set);
    void this.listener?.listen();
    return { settled, cancel: done };
  }

  /** Closes the listener's connection. */
  stop(): void {
    void this.listener?.stop();
  }
}
