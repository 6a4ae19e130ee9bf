import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';
import { OrderItem, OrderStatus } from './order.entity';

export interface OrderRow {
  id: string;
  status: OrderStatus;
  currency: string;
  amount_total: string;
  items: OrderItem[];
  created_at: Date;
}

const COLUMNS = 'id, status, currency, amount_total, items, created_at';

/**
 * All SQL of orders. Runs in the ambient transaction (txHost.tx) when there is
 * one, so an order change commits with the idempotency record. Every statement
 * filters by client_id.
 */
@Injectable()
export class OrdersRepository extends SqlRepository {
  async insert(clientId: string, currency: string, amountTotal: number, items: OrderItem[]): Promise<OrderRow> {
    const [row] = await this.rows<OrderRow>(
      `INSERT INTO orders (client_id, status, currency, amount_total, items)
       VALUES ($1, 'pending', $2, $3, $4::jsonb) RETURNING ${COLUMNS}`,
      [clientId, currency, amountTotal, JSON.stringify(items)],
    );
    return row;
  }

  async find(clientId: string, id: string): Promise<OrderRow | undefined> {
    const [row] = await this.rows<OrderRow>(`SELECT ${COLUMNS} FROM orders WHERE client_id = $1 AND id = $2`, [clientId, id]);
    return row;
  }

  /** Locks the order for the rest of the transaction: payments of one order serialise here. */
  async findForUpdate(clientId: string, id: string): Promise<OrderRow | undefined> {
    const [row] = await this.rows<OrderRow>(`SELECT ${COLUMNS} FROM orders WHERE client_id = $1 AND id = $2 FOR UPDATE`, [clientId, id]);
    return row;
  }

  /** Whether a payment of the order is between its Start and Finish phases, or waits for a person. */
  async hasPaymentInProgress(clientId: string, id: string): Promise<boolean> {
    const rows = await this.rows(
      `SELECT 1 FROM payments WHERE client_id = $1 AND order_id = $2 AND status IN ('processing', 'requires_attention') LIMIT 1`,
      [clientId, id],
    );
    return rows.length > 0;
  }

  /** Moves a pending order to a new status; undefined when it was not pending. */
  async transition(clientId: string, id: string, to: OrderStatus): Promise<OrderRow | undefined> {
    const [row] = await this.rows<OrderRow>(
      `UPDATE orders SET status = $3 WHERE client_id = $1 AND id = $2 AND status = 'pending' RETURNING ${COLUMNS}`,
      [clientId, id, to],
    );
    return row;
  }

  /**
   * Newest first, older than the item `afterId` when given (see SqlRepository.page).
   * From a read replica when there is one: a listing may lag behind a 201 by the
   * replica's delay (the README's "Read replicas").
   */
  listPage(clientId: string, limit: number, afterId?: string): Promise<OrderRow[]> {
    return this.page<OrderRow>('orders', COLUMNS, clientId, limit, afterId, 'replica');
  }
}
