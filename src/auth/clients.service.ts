import { Injectable, OnModuleInit, Logger, Inject } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { generateApiKey, hashApiKey, keyPrefix } from './api-key';
import { AuthenticatedClient } from './authenticated-client';
import { ClientKeyEntity } from './client-key.entity';
import { ClientEntity } from './client.entity';

/**
 * A key found in the database is trusted this long without asking again: a
 * revoked key (or a deleted client's) stops working within 5 s on every instance.
 */
const CACHE_TTL_MS = 5_000;
const CACHE_MAX = 10_000;
/** Unknown keys are remembered this long: a flood of bad keys costs no query each. */
const NEGATIVE_TTL_MS = 5_000;

/**
 * Clients and their API keys. Lookups by key hash are cached for 5 s, found or
 * unknown: authentication runs on every request and must not cost a query
 * each time, and a removed key must stop working soon on every instance.
 */
@Injectable()
export class ClientsService implements OnModuleInit {
  private readonly logger = new Logger(ClientsService.name);
  private readonly cache = new Map<string, { client: AuthenticatedClient; expires: number }>();
  private readonly unknown = new Map<string, number>();

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
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
    return { client, apiKey };
  }

  /** Adds a new key to the client and returns it (the only time it exists in clear); its other keys stay valid until revoked. */
  async rotate(name: string): Promise<{ client: AuthenticatedClient; apiKey: string; key: ClientKeyInfo }> {
    const client = await this.findByName(name);
    const apiKey = generateApiKey();
    const repo = this.dataSource.getRepository(ClientKeyEntity);
    const saved = await repo.save(repo.create({ clientId: client.id, keyHash: hashApiKey(apiKey), prefix: keyPrefix(apiKey) }));
    return { client, apiKey, key: toInfo(saved) };
  }

  /**
   * Revokes exactly one active key of the client: `ref` is its id or the start of
   * its prefix. No match, or several (the error lists their ids): ClientKeyError,
   * nothing revoked. Other instances refuse the key within 5 s (their cache).
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

  /** Drops a key from this instance's caches (other instances notice within CACHE_TTL_MS). */
  private forget(hash: Buffer): void {
    const cacheKey = hash.toString('base64');
    this.cache.delete(cacheKey);
  }

  async authenticate(apiKey: string): Promise<AuthenticatedClient | undefined> {
    const hash = hashApiKey(apiKey);
    const cacheKey = hash.toString('base64');
    const now = Date.now();
    const hit = this.cache.get(cacheKey);
    if (hit && hit.expires > now) return hit.client;
    if ((this.unknown.get(cacheKey) ?? 0) > now) return undefined;

    const row = await this.dataSource
      .getRepository(ClientKeyEntity)
      .createQueryBuilder('k')
      .innerJoin('k.client', 'c')
      .select(['c.id AS id', 'c.name AS name'])
      .where('k.key_hash = :hash AND k.revoked_at IS NULL', { hash })
      .getRawOne<{ id: string; name: string }>();
    if (!row) {
      if (this.unknown.size >= CACHE_MAX) this.unknown.clear();
      this.unknown.set(cacheKey, now + NEGATIVE_TTL_MS);
      return undefined;
    }
    const client = { id: row.id, name: row.name };
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(cacheKey, { client, expires: now + CACHE_TTL_MS });
    return client;
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
