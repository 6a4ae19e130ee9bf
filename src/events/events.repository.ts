import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';

export interface EventRow {
  id: string;
  type: string;
  data: Record<string, unknown>;
  created_at: Date;
}

const COLUMNS = 'id, type, data, created_at';

/** The enabled webhook endpoints of client $1 that want events of type $2 (listed, or all with `*`). */
const SUBSCRIBERS = `SELECT id FROM webhook_endpoints WHERE client_id = $1 AND event_types && ARRAY[$2, '*']::text[] AND disabled_at IS NULL`;

/** All SQL of events and of who receives them; every statement filters by client_id. */
@Injectable()
export class EventsRepository extends SqlRepository {
  /**
   * Writes the event and answers its created_at and the ids of the endpoints
   * subscribed to it, in one statement (both parts see one snapshot).
   */
  async insert(clientId: string, id: string, type: string, data: unknown): Promise<{ created_at: Date; endpoints: string[] }> {
    const [row] = await this.rows<{ created_at: Date; endpoints: string[] }>(
      `WITH event AS (INSERT INTO events (client_id, id, type, data) VALUES ($1, $3, $2, $4::jsonb) RETURNING created_at)
       SELECT event.created_at, ARRAY(${SUBSCRIBERS}) AS endpoints FROM event`,
      [clientId, type, id, JSON.stringify(data)],
    );
    return row;
  }

  /** The ids of the endpoints subscribed to events of `type`. */
  async subscribers(clientId: string, type: string): Promise<string[]> {
    return (await this.rows<{ id: string }>(SUBSCRIBERS, [clientId, type])).map((r) => r.id);
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
