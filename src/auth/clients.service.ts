import { Injectable, OnModuleInit, Logger, Inject, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { LRUCache } from 'lru-cache';
import { DataSource } from 'typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { generateApiKey, hashApiKey, keyPrefix } from './api-key';
import { AuthenticatedClient } from './authenticated-client';
import { ClientKeyEntity } from './client-key.entity';
import { ClientKeysRepository } from './client-keys.repository';
import { ClientEntity } from './client.entity';

/**
 * How often each instance reads the set of active keys again: a key revoked
 * (or a client deleted) by another instance or the CLI is refused within 5 s
 * (this, plus the read itself).
 */
export const KEY_SET_RELOAD_MS = 4_000;
/** A hash looked up and not found is answered unknown this long without asking again. */
const UNKNOWN_TTL_MS = 5_000;
const UNKNOWN_MAX = 10_000;
/** What `lookups` keeps of a hash it did not find (a hash found joins `active` instead). */
const UNKNOWN = 'unknown';

/**
 * Clients and their API keys.
 *
 * Authentication runs on every request and must not cost a query each time,
 * nor let made-up keys cost one each: every instance holds the SHA-256 of
 * every active key in memory (`held`), read again every KEY_SET_RELOAD_MS and
 * changed at once by this process's create, rotate and revoke. A key created
 * by another instance since the last read is not held yet: `lookUp` asks the
 * database for it (one index probe, concurrent lookups of one hash share it),
 * and remembers a hash it did not find for 5 s. The caller decides whether a
 * key may be looked up at all (Authentication: not from an address
 * over its failed-auth budget).
 */
@Injectable()
export class ClientsService implements OnModuleInit, OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(ClientsService.name);
  /**
   * The active keys: base64 of the hash, to its client. A plain Map, not a
   * cache: it is the whole set (every read replaces it), and a key evicted to
   * make room would cost a query on each of its requests.
   */
  private active = new Map<string, AuthenticatedClient>();
  /** Counts this process's changes to `active`: a read that began before one is read again. */
  private changes = 0;
  private reading?: Promise<void>;
  private reloadTimer?: NodeJS.Timeout;
  private closed = false;
  /** Whether the last read failed (its warning is written once per outage). */
  private readFailed = false;
  /**
   * The lookups of hashes not held, by base64 of the hash: lru-cache's `fetch`
   * runs one query per hash however many ask at once, and keeps a hash not
   * found (UNKNOWN) for UNKNOWN_TTL_MS, at most UNKNOWN_MAX of them. A hash
   * found is not kept here (the fetch answers undefined): it joins `active`,
   * where a revocation reaches it.
   */
  private readonly lookups = new LRUCache<string, typeof UNKNOWN, Buffer>({
    max: UNKNOWN_MAX,
    ttl: UNKNOWN_TTL_MS,
    // A lookup under way that is evicted to make room still answers its callers.
    ignoreFetchAbort: true,
    fetchMethod: async (_id, _stale, { context: hash }) => {
      const client = await this.clientKeys.activeKey(hash);
      if (client === undefined) return UNKNOWN;
      this.hold(hash, client);
      return undefined;
    },
  });

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clientKeys: ClientKeysRepository,
  ) {}

  /**
   * Ensures each client named in API_KEYS exists and holds that key as one of its
   * keys (development, compose, tests). Its other keys are left alone: a changed
   * secret adds a key, and the old one works until `client:revoke`.
   */
  async onModuleInit(): Promise<void> {
    for (const seed of this.config.apiKeys) {
      // Instances boot together and seed the same rows: ON CONFLICT with no target
      // covers every unique key (an arbiter on one lets a concurrent insert hit another).
      const keyHash = hashApiKey(seed.secret);
      const prefix = keyPrefix(seed.secret);
      await this.dataSource.query('INSERT INTO clients (name) VALUES ($1) ON CONFLICT DO NOTHING', [seed.name]);
      await this.dataSource.query(
        'INSERT INTO client_keys (client_id, key_hash, prefix) SELECT id, $2, $3 FROM clients WHERE name = $1 ON CONFLICT DO NOTHING',
        [seed.name, keyHash, prefix],
      );
      // A key migrated from the one-key schema has no prefix yet: API_KEYS knows it.
      await this.dataSource.query('UPDATE client_keys SET prefix = $2 WHERE key_hash = $1 AND prefix IS NULL', [keyHash, prefix]);
      const [held] = await this.dataSource.query<{ name: string; revoked: boolean }[]>(
        'SELECT c.name, k.revoked_at IS NOT NULL AS revoked FROM client_keys k JOIN clients c ON c.id = k.client_id WHERE k.key_hash = $1',
        [keyHash],
      );
      if (held?.name !== seed.name) throw new Error(`API_KEYS: the key of "${seed.name}" is already a key of another client`);
      if (held.revoked) this.logger.warn(`API_KEYS: the key of "${seed.name}" was revoked and stays revoked (give it a new secret)`);
    }
    if (this.config.apiKeys.length) this.logger.log(`API_KEYS: ${this.config.apiKeys.map((s) => s.name).join(', ')}`);
    await this.reload();
  }

  onApplicationBootstrap(): void {
    this.reloadTimer = setInterval(() => void this.reload(), KEY_SET_RELOAD_MS).unref();
  }

  onApplicationShutdown(): void {
    this.closed = true;
    clearInterval(this.reloadTimer);
    this.reloadTimer = undefined;
  }

  /**
   * Called by the server once it listens (not by the CLI tools, which boot the
   * same module): without a client every call but health, docs and metrics is
   * a 401, so say how to get a key.
   */
  async warnIfNoClients(): Promise<void> {
    const [{ exists }] = await this.dataSource.query<{ exists: boolean }[]>('SELECT EXISTS (SELECT 1 FROM clients) AS exists');
    if (!exists) {
      this.logger.warn(
        'no API clients yet, so every API call answers 401: create one with `npm run client:create -- <name>` (prints its key once), or set API_KEYS=name:secret',
      );
    }
  }

  /** Creates a client and returns its key: the only time the key exists in clear. */
  async create(name: string): Promise<{ client: AuthenticatedClient; apiKey: string }> {
    const apiKey = generateApiKey();
    const client = await this.dataSource.transaction(async (manager) => {
      const saved = await manager.getRepository(ClientEntity).save(manager.getRepository(ClientEntity).create({ name }));
      await manager.getRepository(ClientKeyEntity).insert({ clientId: saved.id, keyHash: hashApiKey(apiKey), prefix: keyPrefix(apiKey) });
      return { id: saved.id, name: saved.name };
    });
    this.hold(hashApiKey(apiKey), client);
    return { client, apiKey };
  }

  /** Adds a new key to the client and returns it (the only time it exists in clear); its other keys stay valid until revoked. */
  async rotate(name: string): Promise<{ client: AuthenticatedClient; apiKey: string; key: ClientKeyInfo }> {
    const client = await this.findByName(name);
    const apiKey = generateApiKey();
    const repo = this.dataSource.getRepository(ClientKeyEntity);
    const saved = await repo.save(repo.create({ clientId: client.id, keyHash: hashApiKey(apiKey), prefix: keyPrefix(apiKey) }));
    this.hold(saved.keyHash, client);
    return { client, apiKey, key: toInfo(saved) };
  }

  /**
   * Revokes exactly one active key of the client: `ref` is its id or the start of
   * its prefix. No match, or several (the error lists their ids): ClientKeyError,
   * nothing revoked. This process refuses the key at once, other instances
   * within 5 s (their next read of the active keys).
   */
  async revoke(name: string, ref: string): Promise<ClientKeyInfo> {
    const client = await this.findByName(name);
    return this.dataSource.transaction(async (manager) => {
      const matches = await manager
        .getRepository(ClientKeyEntity)
        .createQueryBuilder('k')
        .setLock('pessimistic_write')
        .where('k.client_id = :clientId AND k.revoked_at IS NULL', { clientId: client.id })
        .andWhere('(k.id::text = lower(:ref) OR starts_with(k.prefix, :ref))', { ref })
        .orderBy('k.created_at')
        .getMany();
      if (matches.length === 0) throw new ClientKeyError(`client "${name}" has no active key with id or prefix "${ref}"`);
      if (matches.length > 1) {
        throw new ClientKeyError(`"${ref}" matches ${matches.length} active keys of "${name}", give one id: ${matches.map((k) => k.id).join(', ')}`);
      }
      const [key] = matches;
      await manager.getRepository(ClientKeyEntity).update({ id: key.id }, { revokedAt: () => 'now()' });
      const revoked = await manager.getRepository(ClientKeyEntity).findOneByOrFail({ id: key.id });
      this.forget(revoked.keyHash);
      return toInfo(revoked);
    });
  }

  /** The client's keys, oldest first, revoked ones included: never a secret or a hash. */
  async keys(name: string): Promise<ClientKeyInfo[]> {
    const client = await this.findByName(name);
    const rows = await this.dataSource.getRepository(ClientKeyEntity).find({ where: { clientId: client.id }, order: { createdAt: 'ASC', id: 'ASC' } });
    return rows.map(toInfo);
  }

  private async findByName(name: string): Promise<AuthenticatedClient> {
    const row = await this.dataSource.getRepository(ClientEntity).findOne({ where: { name }, select: { id: true, name: true } });
    if (!row) throw new ClientKeyError(`no client named "${name}"`);
    return { id: row.id, name: row.name };
  }

  /** The client of an active key this instance holds in memory, or undefined (no query). */
  held(apiKey: string): AuthenticatedClient | undefined {
    return this.active.get(hashApiKey(apiKey).toString('base64'));
  }

  /**
   * The client of an active key: from memory, else from the database (one
   * query, shared by concurrent lookups of the same key), unless the key was
   * looked up and not found in the last 5 s.
   */
  async lookUp(apiKey: string): Promise<AuthenticatedClient | undefined> {
    const hash = hashApiKey(apiKey);
    const id = hash.toString('base64');
    const held = this.active.get(id);
    if (held) return held;
    await this.lookups.fetch(id, { context: hash });
    // Found: the lookup made it active (and a revocation since has removed it).
    return this.active.get(id);
  }

  /**
   * Reads the active keys again (a read under way is joined). A failed read
   * keeps the keys held (with the database down, nothing could revoke one) and
   * is warned once until a read succeeds.
   */
  reload(): Promise<void> {
    this.reading ??= this.read().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async read(): Promise<void> {
    try {
      for (;;) {
        const changes = this.changes;
        const rows = await this.clientKeys.activeKeys();
        // This process changed the keys while the rows were read: they may miss that change.
        if (changes !== this.changes) continue;
        this.active = new Map(rows.map((r) => [r.hash.toString('base64'), r.client]));
        break;
      }
      if (this.readFailed) this.logger.log('active API keys read again');
      this.readFailed = false;
    } catch (error) {
      if (this.closed) return; // the pool is gone
      if (!this.readFailed) this.logger.warn(`could not read the active API keys (the keys held are kept): ${(error as Error).message}`);
      this.readFailed = true;
    }
  }

  private hold(hash: Buffer, client: AuthenticatedClient): void {
    this.changes++;
    this.active.set(hash.toString('base64'), client);
  }

  /** Drops a key from this instance's keys (other instances drop it at their next read). */
  private forget(hash: Buffer): void {
    this.changes++;
    this.active.delete(hash.toString('base64'));
  }
}

/** A key as humans see it: never the secret nor its hash. */
export interface ClientKeyInfo {
  id: string;
  prefix: string | null;
  createdAt: Date;
  revokedAt: Date | null;
}

/** A client or key that the name or reference given does not designate (exactly one). */
export class ClientKeyError extends Error {}

function toInfo(key: ClientKeyEntity): ClientKeyInfo {
  return { id: key.id, prefix: key.prefix, createdAt: key.createdAt, revokedAt: key.revokedAt };
}
