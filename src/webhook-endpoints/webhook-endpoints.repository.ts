import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';

export interface WebhookEndpointRow {
  id: string;
  url: string;
  event_types: string[];
  secret: string;
  created_at: Date;
}

const COLUMNS = 'id, url, event_types, secret, created_at';

/** All SQL of webhook endpoints; every statement filters by client_id. */
@Injectable()
export class WebhookEndpointsRepository extends SqlRepository {
  async insert(clientId: string, id: string, url: string, eventTypes: string[], sealedSecret: string): Promise<WebhookEndpointRow> {
    const [row] = await this.rows<WebhookEndpointRow>(
      `INSERT INTO webhook_endpoints (client_id, id, url, event_types, secret) VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
      [clientId, id, url, eventTypes, sealedSecret],
    );
    return row;
  }

  /** The client's endpoints, counted with the client's row locked (to the end of the transaction). */
  async countLocked(clientId: string): Promise<number> {
    await this.rows(`SELECT 1 FROM clients WHERE id = $1 FOR UPDATE`, [clientId]);
    const [{ n }] = await this.rows<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE client_id = $1`, [clientId]);
    return n;
  }

  list(clientId: string): Promise<WebhookEndpointRow[]> {
    return this.rows<WebhookEndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE client_id = $1 ORDER BY created_at DESC, id DESC`, [clientId]);
  }

  async find(clientId: string, id: string): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.rows<WebhookEndpointRow>(`SELECT ${COLUMNS} FROM webhook_endpoints WHERE client_id = $1 AND id = $2`, [clientId, id]);
    return row;
  }

  /** The endpoints that want events of `type` (listed, or all with `*`). */
  subscribed(clientId: string, type: string): Promise<{ id: string }[]> {
    return this.rows<{ id: string }>(`SELECT id FROM webhook_endpoints WHERE client_id = $1 AND event_types && ARRAY[$2, '*']::text[]`, [clientId, type]);
  }

  // The secrets at rest (SecretsAtRest) are read and resealed at boot, every client's: sent
  // unnamed, as migrations are, so that a pooler that cannot keep prepared statements never
  // stops a boot by chance (the request path names its statements, see SqlRepository).

  /** How many secrets each key seals (null: in clear). The key id is the third field of `sealed:v1:<key id>:…` (EndpointSecrets). */
  sealedBy(): Promise<{ key_id: string | null; n: number }[]> {
    return this.txHost.tx.query(
      `SELECT CASE WHEN secret LIKE 'sealed:v1:%' THEN split_part(secret, ':', 3) END AS key_id, count(*)::int AS n
         FROM webhook_endpoints GROUP BY 1`,
    );
  }

  /** Up to `limit` endpoints whose secret is not sealed under `keyId` (in clear, or under another key). */
  notSealedUnder(keyId: string, limit: number): Promise<{ client_id: string; id: string; secret: string }[]> {
    return this.txHost.tx.query(
      `SELECT client_id, id, secret FROM webhook_endpoints
        WHERE secret NOT LIKE 'sealed:v1:' || $1 || ':%'
        ORDER BY client_id, id LIMIT $2`,
      [keyId, limit],
    );
  }

  /** The secret replaced only if it is still `was` (another instance may have sealed it first). */
  async resealed(clientId: string, id: string, was: string, sealed: string): Promise<boolean> {
    const rows = (await this.txHost.tx.query(
      `WITH replaced AS (UPDATE webhook_endpoints SET secret = $4 WHERE client_id = $1 AND id = $2 AND secret = $3 RETURNING id)
       SELECT id FROM replaced`,
      [clientId, id, was, sealed],
    )) as unknown[];
    return rows.length === 1;
  }

  async delete(clientId: string, id: string): Promise<boolean> {
    return (await this.rows(`DELETE FROM webhook_endpoints WHERE client_id = $1 AND id = $2 RETURNING id`, [clientId, id])).length > 0;
  }

  async replaceSecret(clientId: string, id: string, sealedSecret: string): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.rows<WebhookEndpointRow>(
      `UPDATE webhook_endpoints SET secret = $3 WHERE client_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
      [clientId, id, sealedSecret],
    );
    return row;
  }
}
