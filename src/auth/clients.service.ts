import { Injectable, OnModuleInit, Logger, Inject } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { generateApiKey, hashApiKey } from './api-key';
import { AuthenticatedClient } from './authenticated-client';
import { ClientEntity } from './client.entity';

/**
 * A key found in the database is trusted this long without asking again: a
 * deleted client (or a key API_KEYS replaced on another instance) stops working
 * within 5 s on every instance.
 */
const CACHE_TTL_MS = 5_000;
/** Keys seen to authenticate are remembered longer, only to let them past an address's failed-auth block (the guard still checks them). */
const KNOWN_KEY_TTL_MS = 60_000;
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
  private readonly known = new Map<string, number>();

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  /** Upserts the clients named in API_KEYS (development, compose, tests). */
  async onModuleInit(): Promise<void> {
    for (const seed of this.config.apiKeys) {
      // Instances boot together and seed the same rows: ON CONFLICT with no target
      // covers both unique keys (name and key_hash; an arbiter on name alone lets a
      // concurrent insert of the same key_hash fail), then a changed secret is set.
      const keyHash = hashApiKey(seed.secret);
      await this.dataSource.query('INSERT INTO clients (name, key_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING', [seed.name, keyHash]);
      await this.dataSource.query('UPDATE clients SET key_hash = $2 WHERE name = $1 AND key_hash <> $2', [seed.name, keyHash]);
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
    const repo = this.dataSource.getRepository(ClientEntity);
    const saved = await repo.save(repo.create({ name, keyHash: hashApiKey(apiKey) }));
    return { client: { id: saved.id, name: saved.name }, apiKey };
  }

  /** Whether this key authenticated here recently (the cache only, no query): lets a known client past an address's failed-auth block. */
  isKnownKey(apiKey: string): boolean {
    return (this.known.get(hashApiKey(apiKey).toString('base64')) ?? 0) > Date.now();
  }

  async authenticate(apiKey: string): Promise<AuthenticatedClient | undefined> {
    const hash = hashApiKey(apiKey);
    const cacheKey = hash.toString('base64');
    const now = Date.now();
    const hit = this.cache.get(cacheKey);
    if (hit && hit.expires > now) return hit.client;
    if ((this.unknown.get(cacheKey) ?? 0) > now) return undefined;

    const row = await this.dataSource
      .getRepository(ClientEntity)
      .findOne({ where: { keyHash: hash }, select: { id: true, name: true } });
    if (!row) {
      if (this.unknown.size >= CACHE_MAX) this.unknown.clear();
      this.unknown.set(cacheKey, now + NEGATIVE_TTL_MS);
      return undefined;
    }
    const client = { id: row.id, name: row.name };
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    this.cache.set(cacheKey, { client, expires: now + CACHE_TTL_MS });
    if (this.known.size >= CACHE_MAX) this.known.clear();
    this.known.set(cacheKey, now + KNOWN_KEY_TTL_MS);
    return client;
  }
}
