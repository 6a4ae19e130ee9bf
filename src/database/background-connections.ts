import { Injectable } from '@nestjs/common';

/**
 * Connections of the main pool that the app's background database work (the
 * webhook deliveries the outbox relay hands over, up to 40 in flight at once)
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

  /**
   * `statement` made one call per item: the items that arrive while a batch
   * waits for its turn or runs go together in the next batch (one turn, one
   * statement for many), so busy background work writes one statement for
   * many items and idle work writes each at once (at the event loop's next
   * turn, so that items of the same moment go together). A caller gets its
   * item's result (`statement` answers one per item, in order), or the
   * batch's error.
   */
  batched<I, O>(statement: (items: I[]) => Promise<O[]>): (item: I) => Promise<O> {
    let gathering: { item: I; resolve: (result: O) => void; reject: (error: unknown) => void }[] = [];
    let running = false;
    const send = (): void => {
      if (running || gathering.length === 0) return;
      const batch = gathering;
      gathering = [];
      running = true;
      this.run(() => statement(batch.map((b) => b.item)))
        .then(
          (results) => batch.forEach((b, i) => b.resolve(results[i])),
          (error: unknown) => batch.forEach((b) => b.reject(error)),
        )
        .finally(() => {
          running = false;
          send();
        });
    };
    return (item) =>
      new Promise<O>((resolve, reject) => {
        gathering.push({ item, resolve, reject });
        if (gathering.length === 1) setImmediate(send);
      });
  }
}
