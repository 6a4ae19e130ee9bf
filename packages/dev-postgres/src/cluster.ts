import { rm } from 'node:fs/promises';
import { Client } from 'pg';
import { PostgresBusyError, claim, release } from './ownership';
import { ServerProcess, Ids, SUPERUSER, launch } from './server-process';
import { caughtUp, startReplica } from './replica';

/**
 * A started PostgreSQL: its URL, and its stop and start. What startPostgres()
 * returns, for a server it started (Cluster) or one another live process runs
 * (attached to: see start.ts).
 */
export interface DevPostgres {
  readonly port: number;
  /** The data folder in use (another than the requested one when relocated for the postgres user). */
  readonly dataDir: string;
  /** Set when the server is another live process's (attached to): stop() and destroy() then leave it alone. */
  readonly ownerPid?: number;
  /** The streaming replica, when one was asked for. */
  readonly replica?: Replica;
  /** postgres://postgres:<password>@127.0.0.1:<port>/<database> (default: the `database` option, else postgres). */
  url(database?: string): string;
  /** Creates a database; returns its URL. */
  createDatabase(name: string): Promise<string>;
  isRunning(): boolean;
  /** Starts the server again after stop(), on the same port and data (and its replica, if any). */
  start(): Promise<void>;
  /** Fast shutdown of the server (and its replica): sessions are ended, the data is kept. */
  stop(): Promise<void>;
  /** stop(), then removes the data folder, the files beside it and the replica's copy (and a temporary folder). */
  destroy(): Promise<void>;
  /** The server's output so far (its last 64 KB). */
  log(): string;
}

export interface Replica {
  readonly port: number;
  /** The replica's URL (read-only: a hot standby), with the primary's user and password. */
  url(database?: string): string;
  /** Resolves once the replica has applied every commit the primary had made when called; rejects after `timeoutMs` (default 30 s). */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** Fast shutdown of the replica alone (the primary keeps running); start() brings it back on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  log(): string;
}

export const urlOf = (password: string, port: number, database: string) =>
  `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;

export interface ClusterSpec {
  bin: string;
  ids: Ids;
  dataDir: string;
  port: number;
  password: string;
  database: string;
  settings: Record<string, string>;
  ownerFile: string;
  /** What destroy() removes after stopping. */
  files: string[];
  log: (text: string) => void;
  replica?: { dir: string; port: number; applyDelay: string };
  /** Called by destroy() once the files are gone (the exit hook no longer needs to remove them). */
  forget: () => void;
}

/** A cluster this process runs: started by startPostgres(), which holds its owner file. */
export class Cluster implements DevPostgres {
  private server?: ServerProcess;
  private standby?: { process: ServerProcess; restart(): Promise<ServerProcess> };
  readonly replica?: Replica;

  constructor(private readonly spec: ClusterSpec) {
    const r = spec.replica;
    if (r) {
      this.replica = {
        port: r.port,
        url: (database = 'postgres') => urlOf(spec.password, r.port, database),
        caughtUp: (timeoutMs = 30_000) => caughtUp(this.url('postgres'), this.replica!.url('postgres'), timeoutMs),
        log: () => this.standby?.process.output() ?? '',
        stop: async () => {
          await this.standby?.process.stop();
        },
        start: async () => {
          if (this.standby && !this.standby.process.running()) this.standby.process = await this.standby.restart();
        },
      };
    }
  }

  get port() {
    return this.spec.port;
  }
  get dataDir() {
    return this.spec.dataDir;
  }

  url(database = this.spec.database): string {
    return urlOf(this.spec.password, this.spec.port, database);
  }

  isRunning(): boolean {
    return this.server?.running() ?? false;
  }

  log(): string {
    return this.server?.output() ?? '';
  }

  /** The first start (the owner file is already ours): the server, the database, the replica. */
  async open(): Promise<void> {
    const { bin, ids, dataDir, port, settings, log, replica } = this.spec;
    this.server = await launch({ bin, ids, dataDir, port, settings, log });
    await this.ensureDatabase(this.spec.database);
    if (replica) {
      this.standby = await startReplica({
        primaryUrl: this.url('postgres'),
        primaryPort: port,
        primaryDir: dataDir,
        replicaDir: replica.dir,
        applyDelay: replica.applyDelay,
        launch: { bin, ids, port: replica.port, settings, log },
      });
    }
  }

  async start(): Promise<void> {
    if (this.isRunning()) return;
    const owner = await claim(this.spec.ownerFile, this.spec.port);
    if (owner) throw new PostgresBusyError(owner.pid);
    try {
      const { bin, ids, dataDir, port, settings, log } = this.spec;
      this.server = await launch({ bin, ids, dataDir, port, settings, log });
      if (this.standby) this.standby.process = await this.standby.restart();
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    try {
      await this.standby?.process.stop();
      await this.server?.stop();
    } finally {
      release(this.spec.ownerFile);
    }
  }

  async destroy(): Promise<void> {
    try {
      await this.stop();
    } finally {
      for (const file of this.spec.files) await rm(file, { recursive: true, force: true });
      this.spec.forget();
    }
  }

  async createDatabase(name: string): Promise<string> {
    await createDatabase(this.url('postgres'), name);
    return this.url(name);
  }

  /** Creates `database` unless an earlier start already did. */
  private async ensureDatabase(database: string): Promise<void> {
    await createDatabase(this.url('postgres'), database, true);
  }
}

/** CREATE DATABASE `name` through `adminUrl` (unless it exists, with `ifMissing`). */
export async function createDatabase(adminUrl: string, name: string, ifMissing = false): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = ifMissing && (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount;
    if (!exists) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}
