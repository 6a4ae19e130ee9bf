import { Logger } from '@nestjs/common';
import { Client, ClientConfig } from 'pg';

/** What a ChannelListener tells its owner. */
export interface ChannelEvents {
  /** A notification on the channel, with its payload ('' for none). */
  notification(payload: string): void;
  /** The session LISTENs (again): what was sent while none listened was not heard. */
  listening?(): void;
  /** The session failed: nothing is heard until `listen()` connects again. */
  lost?(): void;
}

/**
 * One session of its own that LISTENs on `channel` (never through a
 * transaction pooler), connected by `listen()` when none is, and again after
 * it fails: at most once per `retryMs` after a failed attempt, however often
 * it is asked, and a session that connected but could not LISTEN (a standby
 * refuses it) is closed, not kept. Its failures are logged once until it
 * listens again, and that is logged too.
 */
export class ChannelListener {
  private session?: Promise<Client | undefined>;
  private connected = false;
  /** Whether the session failed, or the last attempt did (logged once). */
  private failing = false;
  /** No attempt before this time (performance.now()): the last one failed. */
  private retryAt = 0;
  /** Counts stop()s: a session connected before the last one is not the listener's. */
  private stops = 0;

  /** `what`: what it listens for, in the log's words (e.g. "settled keys"). */
  constructor(
    private readonly what: string,
    private readonly channel: string,
    private readonly at: ClientConfig & { application_name: string },
    private readonly retryMs: number,
    private readonly events: ChannelEvents,
    private readonly logger: Logger,
  ) {}

  /** Whether the session is connected and LISTENing. */
  get listening(): boolean {
    return this.connected;
  }

  /** Connects the session unless it is connected, or an attempt failed less than `retryMs` ago; resolves once it listens or cannot. */
  async listen(): Promise<void> {
    if (!this.session && performance.now() < this.retryAt) return;
    this.session ??= this.connect();
    await this.session;
  }

  /** Closes the session. */
  async stop(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    this.stops++;
    this.connected = false;
    await session?.then((c) => c?.end()).catch(() => undefined);
  }

  private async connect(): Promise<Client | undefined> {
    const stops = this.stops;
    const client = new Client(this.at);
    client.on('notification', (message) => this.events.notification(message.payload ?? ''));
    client.on('error', (error) => {
      if (stops !== this.stops) return; // a session stop() already ends
      this.logger.warn(`the listener of ${this.what} failed: ${error.message}`);
      this.failing = true;
      void this.stop();
      this.events.lost?.();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
    } catch (error) {
      void client.end().catch(() => undefined);
      if (!this.failing) this.logger.warn(`cannot listen for ${this.what} (trying again at most every ${this.retryMs} ms): ${(error as Error).message}`);
      this.failing = true;
      this.retryAt = performance.now() + this.retryMs;
      if (stops === this.stops) this.session = undefined;
      return undefined;
    }
    if (stops !== this.stops) return client; // stopped meanwhile: stop() ends it
    if (this.failing) this.logger.log(`the listener of ${this.what} listens again`);
    this.failing = false;
    this.connected = true;
    this.events.listening?.();
    return client;
  }
}
