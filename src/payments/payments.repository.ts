import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../database/sql-repository';
import { PaymentStatus } from './payment.entity';

export interface PaymentRow {
  id: string;
  order_id: string | null;
  status: PaymentStatus;
  amount: string;
  currency: string;
  description: string | null;
  failure_code: string | null;
  amount_refunded: string;
  created_at: Date;
}

export interface RefundRow {
  id: string;
  payment_id: string;
  amount: string;
  created_at: Date;
}

export interface NewPayment {
  orderId: string | null;
  status: PaymentStatus;
  amount: number;
  currency: string;
  description: string | null;
  failureCode: string | null;
  networkChargeId: string | null;
}

const COLUMNS = 'id, order_id, status, amount, currency, description, failure_code, amount_refunded, created_at';

/** All SQL of payments and refunds, in the ambient transaction, always by client_id. */
@Injectable()
export class PaymentsRepository extends SqlRepository {
  async insert(clientId: string, p: NewPayment): Promise<PaymentRow> {
    const [row] = await this.rows<PaymentRow>(
      `INSERT INTO payments (client_id, order_id, status, amount, currency, description, failure_code, network_charge_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${COLUMNS}`,
      [clientId, p.orderId, p.status, p.amount, p.currency, p.description, p.failureCode, p.networkChargeId],
    );
    return row;
  }

  async find(clientId: string, id: string): Promise<PaymentRow | undefined> {
    const [row] = await this.rows<PaymentRow>(`SELECT ${COLUMNS} FROM payments WHERE client_id = $1 AND id = $2`, [clientId, id]);
    return row;
  }

  /** Locks the payment: refunds of one payment serialise here. */
  async findForUpdate(clientId: string, id: string): Promise<PaymentRow | undefined> {
    const [row] = await this.rows<PaymentRow>(`SELECT ${COLUMNS} FROM payments WHERE client_id = $1 AND id = $2 FOR UPDATE`, [clientId, id]);
    return row;
  }

  async refunds(clientId: string, paymentId: string): Promise<RefundRow[]> {
    return this.rows<RefundRow>(
      'SELECT id, payment_id, amount, created_at FROM refunds WHERE client_id = $1 AND payment_id = $2 ORDER BY created_at, id',
      [clientId, paymentId],
    );
  }

  /** Records a refund; the CHECK amount_refunded <= amount is the second guard. */
  async addRefund(clientId: string, paymentId: string, amount: number): Promise<RefundRow> {
    await this.rows('UPDATE payments SET amount_refunded = amount_refunded + $3 WHERE client_id = $1 AND id = $2', [clientId, paymentId, amount]);
    const [row] = await this.rows<RefundRow>(
      'INSERT INTO refunds (client_id, payment_id, amount) VALUES ($1, $2, $3) RETURNING id, payment_id, amount, created_at',
      [clientId, paymentId, amount],
    );
    return row;
  }

  /** Newest first, older than the item `afterId` when given (see SqlRepository.page). */
  listPage(clientId: string, limit: number, afterId?: string): Promise<PaymentRow[]> {
    return this.page<PaymentRow>('payments', COLUMNS, clientId, limit, afterId);
  }
}
