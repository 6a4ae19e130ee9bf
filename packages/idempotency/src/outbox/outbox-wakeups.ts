import { Logger } from '@nestjs/common';
import { ClientConfig } from 'pg';
import { ChannelListener } from '../stores/postgres/channel-listener';

/**
 * Wakes the relay when a message is added or replayed: one connection per
 * process LISTENs on the outbox's channel (ChannelListener: a session of its
 * own, on `postgres.listenUrl` when given). The relay polls anyway; a
 * notification only makes it early (one that arrives while the relay is busy
 * ends its next wait at once). A listener that fails ends the wait in
 * progress within `unheardMs` and is connected again at the next wait; while
 * none is connected a wait lasts at most that (what is added then wakes no one), and an
 * attempt to connect is made at most that often; a listener that connects
 * ends the next wait at once too (what was added while none listened).
 */
export class OutboxWakeups {
  private readonly listener: ChannelListener;
  private wake?: () => void;
  /** A notification came while the relay was not waiting: its next wait ends at once. */
  private notified = false;

  constructor(
    channel: string,
    at: ClientConfig,
    private readonly unheardMs: number,
  ) {
    const heard = () => {
      if (this.wake) this.wake();
      else this.notified = true;
    };
    this.listener = new ChannelListener(
      'outbox messages',
      channel,
      { ...at, application_name: 'safe-retries-outbox' },
      unheardMs,
      { notification: heard, listening: heard, lost: () => this.unheard() },
      new Logger('IdempotencyOutbox'),
    );
  }

  /** Whether a listener is connected and LISTENing: every added message wakes the relay. */
  get listening(): boolean {
    return this.listener.listening;
  }

  /**
   * Resolves after `ms` (`unheardMs` at most while no listener is connected),
   * earlier on a notification or (within `unheardMs`) when the listener fails,
   * at once when `signal` aborts.
   */
  async sleep(ms: number, signal: AbortSignal): Promise<void> {
    await this.listener.listen();
    if (this.notified) {
      this.notified = false;
      return;
    }
    const woken = new AbortController();
    this.wake = () => woken.abort();
    await sleep(this.listening ? ms : Math.min(ms, this.unheardMs), AbortSignal.any([signal, woken.signal]));
    this.wake = undefined;
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /**
   * The listener failed: nothing it would have heard wakes the relay now, so
   * the wait in progress ends within `unheardMs`, as a wait without a listener
   * does (not at once: a restarting database is still ending the pool's sessions).
   */
  private unheard(): void {
    const wake = this.wake;
    if (wake) setTimeout(wake, this.unheardMs).unref();
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}
