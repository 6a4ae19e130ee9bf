import { Logger } from '@nestjs/common';
import { Client, ClientConfig } from 'pg';

/**
 * Wakes the relay when a message is added or replayed: one connection per
 * process LISTENs on the outbox's channel (a session of its own, on
 * `listenUrl` when given, never through a transaction pooler). The relay
 * polls anyway; a notification only makes it early. A failed listener is
 * dropped and connected again at the next wait.
 */
export class OutboxWakeups {
  private readonly logger = new Logger('IdempotencyOutbox');
  private listener?: Promise<Client | undefined>;
  private wake?: () => void;

  constructor(
    private readonly channel: string,
    private readonly at: ClientConfig,
  ) {}

  /** Resolves after `ms`, or earlier on a notification (or `interrupt`). */
  async sleep(ms: number): Promise<void> {
    await this.listen();
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    });
    this.wake = undefined;
  }

  interrupt(): void {
    this.wake?.();
  }

  async stop(): Promise<void> {
    const listener = this.listener;
    this.listener = undefined;
    this.interrupt();
    await listener?.then((c) => c?.end()).catch(() => undefined);
  }

  private listen(): Promise<Client | undefined> {
    this.listener ??= (async () => {
      const client = new Client({ ...this.at, application_name: 'safe-retries-outbox' });
      client.on('notification', () => this.interrupt());
      client.on('error', (error) => {
        this.logger.warn(`the outbox listener failed: ${error.message}`);
        this.listener = undefined;
        void client.end().catch(() => undefined);
      });
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
      return client;
    })().catch((error: unknown) => {
      this.logger.warn(`cannot listen for outbox messages (polling): ${(error as Error).message}`);
      this.listener = undefined;
      return undefined;
    });
    return this.listener;
  }
}
