import { Logger } from '@nestjs/common';
import { Client, ClientConfig } from 'pg';

/**
 * Wakes the relay when a message is added or replayed: one connection per
 * process LISTENs on the outbox's channel (a session of its own, on
 * `postgres.listenUrl` when given, never through a transaction pooler). The relay
 * polls anyway; a notification only makes it early (one that arrives while
 * the relay is busy ends its next wait at once). A failed listener is
 * dropped and connected again at the next wait; a listener that connects
 * ends the next wait at once too (what was added while none listened).
 */
export class OutboxWakeups {
  private readonly logger = new Logger('IdempotencyOutbox');
  private listener?: Promise<Client | undefined>;
  private wake?: () => void;
  /** A notification came while the relay was not waiting: its next wait ends at once. */
  private notified = false;
  private connected = false;

  constructor(
    private readonly channel: string,
    private readonly at: ClientConfig,
  ) {}

  /** Whether a listener is connected and LISTENing: every added message wakes the relay. */
  get listening(): boolean {
    return this.connected;
  }

  /** Resolves after `ms`, earlier on a notification, at once when `signal` aborts. */
  async sleep(ms: number, signal: AbortSignal): Promise<void> {
    await this.listen();
    if (this.notified) {
      this.notified = false;
      return;
    }
    const woken = new AbortController();
    this.wake = () => woken.abort();
    await sleep(ms, AbortSignal.any([signal, woken.signal]));
    this.wake = undefined;
  }

  async stop(): Promise<void> {
    const listener = this.listener;
    this.listener = undefined;
    this.connected = false;
    await listener?.then((c) => c?.end()).catch(() => undefined);
  }

  private listen(): Promise<Client | undefined> {
    this.listener ??= (async () => {
      const client = new Client({ ...this.at, application_name: 'safe-retries-outbox' });
      client.on('notification', () => {
        if (this.wake) this.wake();
        else this.notified = true;
      });
      client.on('error', (error) => {
        this.logger.warn(`the outbox listener failed: ${error.message}`);
        this.connected = false;
        this.listener = undefined;
        void client.end().catch(() => undefined);
      });
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
      this.connected = true;
      this.notified = true;
      return client;
    })().catch((error: unknown) => {
      this.logger.warn(`cannot listen for outbox messages (polling): ${(error as Error).message}`);
      this.listener = undefined;
      return undefined;
    });
    return this.listener;
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
