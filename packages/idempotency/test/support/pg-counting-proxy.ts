import { AddressInfo, Server, Socket, connect, createServer } from 'node:net';

/**
 * A TCP proxy between an app and PostgreSQL that counts what the server did for
 * the app, from the server's own answers (whatever client library, pool or
 * protocol sent the statements): each statement executed ends with a
 * CommandComplete message, and each round trip with ReadyForQuery, whose status
 * byte says whether a transaction is open ('T'), failed ('E') or none ('I').
 *
 * - statements: CommandComplete messages (BEGIN and COMMIT included).
 * - commits: COMMITs, plus statements that ran outside a transaction block
 *   (autocommit: each is a transaction of its own, committed when it ends).
 * - answers: ReadyForQuery messages after startup: one per request (a simple
 *   Query, or a Sync that ends an extended-protocol statement).
 * - roundTrips: the times the client waited for the server: requests it sent
 *   while no earlier request of its connection was unanswered. A pipelined
 *   request, sent before the answer to the one before it, waits with it.
 *
 * Both directions are parsed as type byte + int32 length messages, the
 * client's after its untyped startup message; the bytes are relayed as they come.
 */
export interface PgCounts {
  statements: number;
  commits: number;
  answers: number;
  roundTrips: number;
}

export interface PgCountingProxy {
  /** `databaseUrl` with its host and port replaced by the proxy's. */
  url(databaseUrl: string): string;
  /** The counts so far, over every connection. */
  counts(): PgCounts;
  close(): Promise<void>;
}

/** Splits a direction's bytes into messages (type byte + int32 length), after `untyped` bytes of an untyped first message. */
class Messages {
  private buffered: Buffer = Buffer.alloc(0);

  constructor(
    private readonly each: (type: string, payload: Buffer) => void,
    private untyped = false,
  ) {}

  feed(chunk: Buffer): void {
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    if (this.untyped) {
      if (this.buffered.length < 4) return;
      const length = this.buffered.readInt32BE(0);
      if (this.buffered.length < length) return;
      this.buffered = this.buffered.subarray(length);
      this.untyped = false;
    }
    while (this.buffered.length >= 5) {
      const length = this.buffered.readInt32BE(1);
      if (this.buffered.length < 1 + length) return;
      const type = String.fromCharCode(this.buffered[0]);
      const payload = this.buffered.subarray(5, 1 + length);
      this.buffered = this.buffered.subarray(1 + length);
      this.each(type, payload);
    }
  }
}

class ConnectionCounter {
  private commandsSinceReady = 0;
  private lastTag = '';
  private status = 'I';
  private ready = false;
  /** Requests sent and not yet answered. */
  private unanswered = 0;
  readonly backend = new Messages((type, payload) => {
    if (type === 'C') this.commandComplete(payload.toString('utf8', 0, payload.indexOf(0)));
    if (type === 'Z') this.readyForQuery(String.fromCharCode(payload[0]));
  });
  readonly frontend = new Messages((type) => {
    // A simple Query, or the Sync that ends an extended-protocol request: each gets one ReadyForQuery.
    if (!this.ready || (type !== 'Q' && type !== 'S')) return;
    if (this.unanswered === 0) this.total.roundTrips++;
    this.unanswered++;
  }, true);

  constructor(private readonly total: PgCounts) {}

  private commandComplete(tag: string): void {
    this.total.statements++;
    this.commandsSinceReady++;
    this.lastTag = tag.split(' ')[0];
    if (this.lastTag === 'COMMIT') this.total.commits++;
  }

  private readyForQuery(status: string): void {
    if (this.ready) {
      this.total.answers++;
      this.unanswered = Math.max(0, this.unanswered - 1);
    }
    // Statements that ran with no transaction open before or after: autocommit.
    if (this.ready && this.status === 'I' && status === 'I' && this.commandsSinceReady > 0 && !['COMMIT', 'ROLLBACK'].includes(this.lastTag)) {
      this.total.commits++;
    }
    this.ready = true;
    this.status = status;
    this.commandsSinceReady = 0;
  }
}

/** Starts a counting proxy to `target` (host and port of the server). */
export async function startPgCountingProxy(target: { host: string; port: number }): Promise<PgCountingProxy> {
  const total: PgCounts = { statements: 0, commits: 0, answers: 0, roundTrips: 0 };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    const counter = new ConnectionCounter(total);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => counter.frontend.feed(chunk));
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => counter.backend.feed(chunk));
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (databaseUrl) => {
      const u = new URL(databaseUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    counts: () => ({ ...total }),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
