import { AddressInfo, Server, Socket, createServer, connect } from 'node:net';

/**
 * A TCP proxy between the app and PostgreSQL that can lose the acknowledgement
 * of a COMMIT: the COMMIT reaches the server and takes effect, the server's
 * answer never reaches the app, and the connection is reset under it.
 *
 * Bytes are relayed both ways as they come. A copy of each direction is parsed
 * just enough to see the messages:
 * - frontend (app -> server): the startup packet (no type byte; an SSLRequest or
 *   GSSENCRequest is answered 'N' here, so the app speaks plain text), then
 *   type byte + int32 length messages. A COMMIT is a Simple Query 'Q' whose text
 *   starts with COMMIT, a Parse 'P' whose text does, or a Bind 'B' of a named
 *   statement parsed as COMMIT. Every message of each chunk is scanned: the app
 *   pipelines a transaction's last statement and its COMMIT in one write.
 * - backend (server -> app): type byte + int32 length messages; only the
 *   CommandComplete tags matter, to know when the server has executed the
 *   COMMIT (its tag is COMMIT, or ROLLBACK when the transaction had failed).
 *
 * `armResetAfterCommit(filter)`: the next COMMIT (of a transaction the filter
 * accepts) on any connection is forwarded; from then on nothing the server
 * sends on that connection reaches the app; once the server has answered the
 * COMMIT (or has said nothing for a while), both sockets are reset.
 */

/** What the proxy saw of the transaction that a COMMIT ends, for `armResetAfterCommit`'s filter. */
export interface CommitContext {
  /** Query texts sent since the connection's previous COMMIT or ROLLBACK (Simple Query and Parse), in order. */
  queries: string[];
  /** Names of the prepared statements parsed or bound since then (node-postgres sends `name` of a query config). */
  statements: string[];
  /** The connection's startup parameters (user, database, application_name, options...). */
  startup: Record<string, string>;
}

export type CommitFilter = (commit: CommitContext) => boolean;

export interface PgResetProxy {
  host: string;
  port: number;
  /** `databaseUrl` with its host and port replaced by the proxy's. */
  url(databaseUrl: string): string;
  /** The next COMMIT the filter accepts (any, without one) loses its answer and its connection. */
  armResetAfterCommit(filter?: CommitFilter): void;
  disarm(): void;
  /** Whether an armed reset is still waiting for its COMMIT. */
  readonly armed: boolean;
  /** Connections reset so far. */
  readonly resets: number;
  /** For each reset, what the server answered to the COMMIT: its tag (COMMIT, ROLLBACK) or 'unknown'. */
  readonly outcomes: readonly string[];
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
/** With no CommandComplete for the COMMIT, the reset comes after the server has been quiet this long. */
const QUIET_MS = 500;

function cstring(buffer: Buffer, offset: number): { value: string; next: number } {
  const end = buffer.indexOf(0, offset);
  if (end < 0) return { value: buffer.toString('utf8', offset), next: buffer.length };
  return { value: buffer.toString('utf8', offset, end), next: end + 1 };
}

const isCommit = (sql: string) => /^\s*commit\b/i.test(sql);
const isRollback = (sql: string) => /^\s*(rollback|abort)\b/i.test(sql);

class Relay {
  /** Unparsed bytes of each direction (a message may span chunks). */
  private frontend: Buffer = Buffer.alloc(0);
  private backend: Buffer = Buffer.alloc(0);
  private startupDone = false;
  private startup: Record<string, string> = {};
  private queries: string[] = [];
  private statements: string[] = [];
  /** Named prepared statements whose text is a COMMIT. */
  private readonly commitStatements = new Set<string>();
  /** Set once an armed COMMIT went through: the server's answers are swallowed until the reset. */
  private resetting = false;
  private quiet?: NodeJS.Timeout;

  constructor(
    private readonly client: Socket,
    private readonly server: Socket,
    private readonly proxy: ProxyState,
  ) {
    client.on('data', (chunk: Buffer) => this.fromClient(chunk));
    server.on('data', (chunk: Buffer) => this.fromServer(chunk));
    const closeBoth = () => {
      clearTimeout(this.quiet);
      client.destroy();
      server.destroy();
    };
    client.on('close', closeBoth);
    server.on('close', closeBoth);
    client.on('error', () => undefined);
    server.on('error', () => undefined);
  }

  private fromClient(chunk: Buffer): void {
    if (!this.startupDone) {
      this.frontend = Buffer.concat([this.frontend, chunk]);
      const rest = this.negotiate();
      if (!rest) return;
      chunk = rest;
    }
    // Relayed as it came (a message split across chunks included); only the parsing waits for the rest.
    this.server.write(chunk);
    this.scan(chunk);
  }

  /** Before the startup packet: answers an encryption request 'N'; the bytes after the startup packet once it has passed. */
  private negotiate(): Buffer | undefined {
    let offset = 0;
    let rest: Buffer | undefined;
    while (this.frontend.length - offset >= 8) {
      const length = this.frontend.readInt32BE(offset);
      if (this.frontend.length - offset < length) break;
      const code = this.frontend.readInt32BE(offset + 4);
      if (length === 8 && (code === SSL_REQUEST || code === GSSENC_REQUEST)) {
        // Not forwarded: the app is told "no encryption" and sends its startup packet next.
        this.client.write('N');
        offset += length;
        continue;
      }
      // The startup packet (or a CancelRequest, relayed alike).
      this.readStartup(this.frontend.subarray(offset + 8, offset + length));
      this.server.write(this.frontend.subarray(offset, offset + length));
      this.startupDone = true;
      rest = this.frontend.subarray(offset + length);
      offset = this.frontend.length;
      break;
    }
    this.frontend = this.startupDone ? Buffer.alloc(0) : Buffer.from(this.frontend.subarray(offset));
    return rest;
  }

  /** Scans every complete message of the app's bytes (a chunk may hold several: a pipelined statement and its COMMIT). */
  private scan(chunk: Buffer): void {
    this.frontend = this.frontend.length ? Buffer.concat([this.frontend, chunk]) : chunk;
    let offset = 0;
    let trigger = false;
    while (this.frontend.length - offset >= 5) {
      const length = this.frontend.readInt32BE(offset + 1);
      if (this.frontend.length - offset < 1 + length) break;
      const type = String.fromCharCode(this.frontend[offset]);
      if (this.onMessage(type, this.frontend.subarray(offset + 5, offset + 1 + length)) && !this.resetting) trigger = true;
      offset += 1 + length;
    }
    this.frontend = Buffer.from(this.frontend.subarray(offset));
    // The rest of the chunk (the COMMIT's Bind, Execute, Sync) went to the server with it.
    if (trigger) this.startReset();
  }

  private readStartup(params: Buffer): void {
    let offset = 0;
    while (offset < params.length && params[offset] !== 0) {
      const key = cstring(params, offset);
      const value = cstring(params, key.next);
      this.startup[key.value] = value.value;
      offset = value.next;
    }
  }

  /** A complete frontend message; true when it is the armed COMMIT. */
  private onMessage(type: string, body: Buffer): boolean {
    let commit = false;
    let rollback = false;
    if (type === 'Q') {
      const sql = cstring(body, 0).value;
      this.queries.push(sql);
      commit = isCommit(sql);
      rollback = isRollback(sql);
    } else if (type === 'P') {
      const name = cstring(body, 0);
      const sql = cstring(body, name.next).value;
      this.queries.push(sql);
      if (name.value) {
        this.statements.push(name.value);
        if (isCommit(sql)) this.commitStatements.add(name.value);
      }
      commit = isCommit(sql);
      rollback = isRollback(sql);
    } else if (type === 'B') {
      const portal = cstring(body, 0);
      const statement = cstring(body, portal.next).value;
      if (statement) {
        this.statements.push(statement);
        commit = this.commitStatements.has(statement);
      }
    }
    if (!commit && !rollback) return false;
    const context: CommitContext = { queries: this.queries, statements: this.statements, startup: { ...this.startup } };
    this.queries = [];
    this.statements = [];
    return commit && !this.resetting && this.proxy.take(context);
  }

  private fromServer(chunk: Buffer): void {
    if (this.client.destroyed) return;
    if (!this.resetting) {
      this.client.write(chunk);
      return;
    }
    // Swallowed: the app never learns what the server answered.
    this.backend = Buffer.concat([this.backend, chunk]);
    let offset = 0;
    while (this.backend.length - offset >= 5) {
      const length = this.backend.readInt32BE(offset + 1);
      if (this.backend.length - offset < 1 + length) break;
      const type = String.fromCharCode(this.backend[offset]);
      if (type === 'C') {
        const tag = cstring(this.backend.subarray(offset + 5, offset + 1 + length), 0).value;
        if (tag === 'COMMIT' || tag === 'ROLLBACK') {
          this.reset(tag);
          return;
        }
      }
      offset += 1 + length;
    }
    this.backend = Buffer.from(this.backend.subarray(offset));
    this.armQuietTimer();
  }

  private startReset(): void {
    this.resetting = true;
    this.armQuietTimer();
  }

  private armQuietTimer(): void {
    clearTimeout(this.quiet);
    this.quiet = setTimeout(() => this.reset('unknown'), QUIET_MS);
  }

  private reset(outcome: string): void {
    clearTimeout(this.quiet);
    if (this.client.destroyed && this.server.destroyed) return;
    this.proxy.recordReset(outcome);
    // RST rather than FIN, as a dropped connection looks to the app.
    this.client.resetAndDestroy();
    this.server.resetAndDestroy();
  }
}

class ProxyState {
  filter: CommitFilter | null = null;
  resets = 0;
  readonly outcomes: string[] = [];

  take(context: CommitContext): boolean {
    if (!this.filter || !this.filter(context)) return false;
    this.filter = null;
    return true;
  }

  recordReset(outcome: string): void {
    this.resets++;
    this.outcomes.push(outcome);
  }
}

/** Starts the proxy on 127.0.0.1 (a free port) in front of the server of `databaseUrl`. */
export async function startPgResetProxy(databaseUrl: string): Promise<PgResetProxy> {
  const target = new URL(databaseUrl);
  const targetHost = target.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const targetPort = Number(target.port || 5432);
  const state = new ProxyState();
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };

  const server: Server = createServer((client) => {
    track(client);
    const upstream = connect({ host: targetHost, port: targetPort });
    track(upstream);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    new Relay(client, upstream, state);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = '127.0.0.1';

  return {
    host,
    port,
    url: (url) => {
      const u = new URL(url);
      u.hostname = host;
      u.port = String(port);
      return u.toString();
    },
    armResetAfterCommit: (filter = () => true) => {
      state.filter = filter;
    },
    disarm: () => {
      state.filter = null;
    },
    get armed() {
      return state.filter !== null;
    },
    get resets() {
      return state.resets;
    },
    get outcomes() {
      return state.outcomes;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
