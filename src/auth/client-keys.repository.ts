import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { AuthenticatedClient } from './authenticated-client';

/** An active key's SHA-256 and its client. */
export interface ActiveKey {
  hash: Buffer;
  client: AuthenticatedClient;
}

/**
 * The two reads authentication makes of client_keys (ClientsService holds
 * their results in memory): every active key, and one key by its hash. Both
 * run on the main pool, outside any transaction.
 */
@Injectable()
export class ClientKeysRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Every key not revoked, with its client: one sequential read of client_keys and clients. */
  async activeKeys(): Promise<ActiveKey[]> {
    const rows = await this.dataSource.query<{ key_hash: Buffer; id: string; name: string }[]>(
      'SELECT k.key_hash, c.id, c.name FROM client_keys k JOIN clients c ON c.id = k.client_id WHERE k.revoked_at IS NULL',
    );
    return rows.map((r) => ({ hash: r.key_hash, client: { id: r.id, name: r.name } }));
  }

  /** The client of the key with this hash if it is not revoked: one probe of client_keys_key_hash_key. */
  async activeKey(hash: Buffer): Promise<AuthenticatedClient | undefined> {
    const [row] = await this.dataSource.query<{ id: string; name: string }[]>(
      'SELECT c.id, c.name FROM client_keys k JOIN clients c ON c.id = k.client_id WHERE k.key_hash = $1 AND k.revoked_at IS NULL',
      [hash],
    );
    return row === undefined ? undefined : { id: row.id, name: row.name };
  }
}
