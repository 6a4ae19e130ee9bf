import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';

export interface EventRow {
  id: string;
  type: string;
  data: Record<string, unknown>;
  created_at: Date;
}

const COLUMNS = 'id, type, data, created_at';

/** All SQL of events; every statement filters by client_id. */
@Injectable()
export class EventsRepository extends SqlRepository {
  async insert(clientId: string, id: string, type: string, data: unknown): Promise<void> {
    await this.rows(`INSERT INTO events (client_id, id, type, data) VALUES ($1, $2, $3, $4::jsonb)`, [clientId, id, type, JSON.stringify(data)]);
  }

  async find(clientId: string, id: string): Promise<EventRow | undefined> {
    const [row] = await this.rows<EventRow>(`SELECT ${COLUMNS} FROM events WHERE client_id = $1 AND id = $2`, [clientId, id]);
    return row;
  }

  /**
   * Newest first (by seq), `limit + 1` rows, older than the event `afterId`
   * when given: the cursor's seq is read inside the statement.
   */
  listPage(clientId: string, limit: number, afterId?: string): Promise<EventRow[]> {
    if (!afterId) return this.rows<EventRow>(`SELECT ${COLUMNS} FROM events WHERE client_id = $1 ORDER BY seq DESC LIMIT $2`, [clientId, limit + 1]);
    return this.rows<EventRow>(
      `SELECT ${COLUMNS} FROM events
        WHERE client_id = $1 AND seq < (SELECT seq FROM events WHERE client_id = $1 AND id = $2)
        ORDER BY seq DESC LIMIT $3`,
      [clientId, afterId, limit + 1],
    );
  }
}
