import { Injectable } from '@nestjs/common';

/**
 * Connections of the main pool that the app's background database work (the
 * webhook deliveries the outbox relay hands over, up to 20 in flight at once)
 * holds at once. The rest of the pool stays for requests: the relay's
 * deliveries never take the connections a burst of requests waits for.
 */
export const BACKGROUND_CONNECTIONS = 2;

/**
 * Turns at the main pool for background work: `run` holds one of
 * BACKGROUND_CONNECTIONS turns while its work runs (its statements one after
 * another, so one connection at a time); the next wait, first come first
 * served. The library's jobs bound themselves: the relay's own statements
 * (RELAY_CONNECTIONS), the purge (two connections, one instance at a time), the
 * recovery job and the refund settlement (one operation at a time).
 */
@Injectable()
export class BackgroundConnections {
  private free = BACKGROUND_CONNECTIONS;
  private readonly waiting: (() => void)[] = [];

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The turn passes straight to the next in line, so a newcomer cannot cut in.
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}
