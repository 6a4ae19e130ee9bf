import { Injectable } from '@nestjs/common';
import { SqlRepository } from '../../database/sql-repository';
import { PaymentStatus } from './payment.entity';
import { MAX_REFUNDS_PER_PAYMENT, RefundLimitReachedException } from './refund-limit';
import { RefundStatus } from './refund.entity';

export interface PaymentRow {
  id: string;
  order_id: string | null;
  status: PaymentStatus;
  amount: string;
  currency: string;
  description: string | null;
  failure_code: string | null;
  amount_refunded: string;
  payment_method: string | null;
  network_charge_id: string | null;
  idempotency_key: string | null;
  created_at: Date;
}

export interface RefundRow {
  id: string;
  payment_id: string;
  amount: string;
  status: RefundStatus;
  network_refund_id: string | null;
  failure_reason: string | null;
  idempotency_key: string | null;
  created_at: Date;
}

/** Where a walk of the settlement job stands: the last refund it read. */
export interface RefundCursor {
  /** created_at as text (exact, the database's own rendering). */
  at: string;
  client_id: string;
  id: string;
}

/** A refund the network may still move, as the settlement job finds it. */
export interface PendingRefund extends RefundCursor {
  network_refund_id: string;
}

const WALK = (where: string) => `
SELECT client_id, id, network_refund_id, created_at::text AS at FROM refunds
 WHERE ${where}
   AND ($2::timestamptz IS NULL OR (created_at, client_id, id) > ($2::timestamptz, $3::uuid, $4::uuid))
 ORDER BY created_at, client_id, id LIMIT $1`;
const PENDING_WALK = WALK(`status = 'pending'`);
const SUCCEEDED_WALK = WALK(`status = 'succeeded' AND created_at > now() - $5::int8 * interval '1 millisecond'`);

export interface NewPayment {
  orderId: string | null;
  amount: number;
  currency: string;
  description: string | null;
  paymentMethod: string;
  idempotencyKey: string;
}

const COLUMNS = 'id, order_id, status, amount, currency, description, failure_code, amount_refunded, payment_method, network_charge_id, idempotency_key, created_at';
const REFUND_COLUMNS = 'id, payment_id, amount, status, network_refund_id, failure_reason, idempotency_key, created_at';

/** All SQL of payments and refunds, in the ambient transaction, always by client_id. */
@Injectable()
export class PaymentsRepository extends SqlRepository {
  /** A payment in its Start phase: processing, it reserves its order (payments_one_active_per_order). */
  async insertProcessing(clientId: string, p: NewPayment): Promise<PaymentRow> {
    const [row] = await this.rows<PaymentRow>(
      `INSERT INTO payments (client_id, order_id, status, amount, currency, description, payment_method, idempotency_key)
       VALUES ($1, $2, 'processing', $3, $4, $5, $6, $7) RETURNING ${COLUMNS}`,
      [clientId, p.orderId, p.amount, p.currency, p.description, p.paymentMethod, p.idempotencyKey],
    );
    return row;
  }

  /** Records the card network's intent of a processing payment, before anything can charge it. */
  async attachIntent(clientId: string, id: string, intentId: string): Promise<PaymentRow | undefined> {
    const [row] = await this.rows<PaymentRow>(
      `UPDATE payments SET network_charge_id = $3
        WHERE client_id = $1 AND id = $2 AND status = 'processing' RETURNING ${COLUMNS}`,
      [clientId, id, intentId],
    );
    return row;
  }

  /** The Finish phase: a processing payment becomes succeeded or failed, once. */
  async settle(clientId: string, id: string, outcome: { status: 'succeeded' | 'failed'; failureCode: string | null }): Promise<PaymentRow | undefined> {
    const [row] = await this.rows<PaymentRow>(
      `UPDATE payments SET status = $3, failure_code = $4
        WHERE client_id = $1 AND id = $2 AND status = 'processing' RETURNING ${COLUMNS}`,
      [clientId, id, outcome.status, outcome.failureCode],
    );
    return row;
  }

  /**
   * A payment handed to a person, or taken back from one (`from` -> `to`:
   * processing <-> requires_attention); false when it was not at `from`.
   */
  async movePayment(clientId: string, id: string, from: PaymentStatus, to: PaymentStatus): Promise<boolean> {
    const rows = await this.rows(`UPDATE payments SET status = $4 WHERE client_id = $1 AND id = $2 AND status = $3 RETURNING id`, [clientId, id, from, to]);
    return rows.length === 1;
  }

  /** An operator marked a payment that required attention failed: its order is payable again (the unique index no longer counts it). */
  async failByOperator(clientId: string, id: string, failureCode: string): Promise<PaymentRow | undefined> {
    const [row] = await this.rows<PaymentRow>(
      `UPDATE payments SET status = 'failed', failure_code = $3
        WHERE client_id = $1 AND id = $2 AND status = 'requires_attention' RETURNING ${COLUMNS}`,
      [clientId, id, failureCode],
    );
    return row;
  }

  /** Undoes a Start phase when the card network did nothing. */
  async deleteProcessing(clientId: string, id: string): Promise<void> {
    await this.rows(`DELETE FROM payments WHERE client_id = $1 AND id = $2 AND status = 'processing'`, [clientId, id]);
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

  /** The refunds of a payment, oldest first: at most MAX_REFUNDS_PER_PAYMENT, which reserveRefund enforces. */
  async refunds(clientId: string, paymentId: string): Promise<RefundRow[]> {
    return this.rows<RefundRow>(
      `SELECT ${REFUND_COLUMNS} FROM refunds WHERE client_id = $1 AND payment_id = $2 ORDER BY created_at, id LIMIT $3`,
      [clientId, paymentId, MAX_REFUNDS_PER_PAYMENT],
    );
  }

  async findRefund(clientId: string, id: string): Promise<RefundRow | undefined> {
    const [row] = await this.rows<RefundRow>(`SELECT ${REFUND_COLUMNS} FROM refunds WHERE client_id = $1 AND id = $2`, [clientId, id]);
    return row;
  }

  /**
   * A refund in its Start phase: the amount is reserved against the payment at
   * once (the CHECK amount_refunded <= amount is the second guard), so no two
   * refunds can together ask the card network for more than was paid.
   */
  async reserveRefund(clientId: string, paymentId: string, amount: number, idempotencyKey: string): Promise<RefundRow> {
    // The caller holds the payment's row lock (findForUpdate): the count cannot change under us.
    const [{ n }] = await this.rows<{ n: number }>('SELECT count(*)::int AS n FROM refunds WHERE client_id = $1 AND payment_id = $2', [clientId, paymentId]);
    if (n >= MAX_REFUNDS_PER_PAYMENT) throw new RefundLimitReachedException(paymentId);
    await this.rows('UPDATE payments SET amount_refunded = amount_refunded + $3 WHERE client_id = $1 AND id = $2', [clientId, paymentId, amount]);
    const [row] = await this.rows<RefundRow>(
      `INSERT INTO refunds (client_id, payment_id, amount, status, idempotency_key)
       VALUES ($1, $2, $3, 'processing', $4) RETURNING ${REFUND_COLUMNS}`,
      [clientId, paymentId, amount, idempotencyKey],
    );
    return row;
  }

  /** The card network has the refund (succeeded, or pending until it settles): recorded with its id, once. */
  async settleRefund(clientId: string, id: string, networkRefundId: string, status: 'pending' | 'succeeded'): Promise<RefundRow | undefined> {
    const [row] = await this.rows<RefundRow>(
      `UPDATE refunds SET status = $4, network_refund_id = $3
        WHERE client_id = $1 AND id = $2 AND status = 'processing' RETURNING ${REFUND_COLUMNS}`,
      [clientId, id, networkRefundId, status],
    );
    return row;
  }

  /**
   * The network settled a refund it had: pending -> succeeded, or pending or
   * succeeded -> failed, which gives the amount back to the payment in the same
   * statement. Only the refund with this network id moves, and never backwards.
   */
  async moveRefund(
    clientId: string,
    id: string,
    networkRefundId: string,
    to: { status: 'succeeded' } | { status: 'failed'; failureReason: string | null },
  ): Promise<RefundRow | undefined> {
    if (to.status === 'succeeded') {
      const [row] = await this.rows<RefundRow>(
        `UPDATE refunds SET status = 'succeeded'
          WHERE client_id = $1 AND id = $2 AND network_refund_id = $3 AND status = 'pending' RETURNING ${REFUND_COLUMNS}`,
        [clientId, id, networkRefundId],
      );
      return row;
    }
    const [row] = await this.rows<RefundRow>(
      `WITH failed AS (
         UPDATE refunds SET status = 'failed', failure_reason = $4
          WHERE client_id = $1 AND id = $2 AND network_refund_id = $3 AND status IN ('pending', 'succeeded')
          RETURNING ${REFUND_COLUMNS}),
       given_back AS (
         UPDATE payments p SET amount_refunded = p.amount_refunded - f.amount
           FROM failed f WHERE p.client_id = $1 AND p.id = f.payment_id)
       SELECT * FROM failed`,
      [clientId, id, networkRefundId, to.failureReason],
    );
    return row;
  }

  /**
   * The next refunds of one of the settlement job's walks, of every client, in
   * (created_at, client_id, id) order after `after` (from the start when
   * null): the pending ones, or the succeeded ones made within the last
   * `windowMs` (the database's clock). `at` is created_at as text, exact to
   * the microsecond, so it can be sent back as the next cursor.
   */
  refundsToSettle(walk: 'pending' | 'succeeded', limit: number, after: RefundCursor | null, windowMs: number): Promise<PendingRefund[]> {
    const sql = walk === 'pending' ? PENDING_WALK : SUCCEEDED_WALK;
    const params = [limit, after?.at ?? null, after?.client_id ?? null, after?.id ?? null];
    return this.rows<PendingRefund>(sql, walk === 'pending' ? params : [...params, windowMs]);
  }

  /** A refund handed to a person, or taken back from one (processing <-> requires_attention); false when it was not at `from`. */
  async moveRefundAttention(clientId: string, id: string, from: RefundStatus, to: RefundStatus): Promise<boolean> {
    const rows = await this.rows(`UPDATE refunds SET status = $4 WHERE client_id = $1 AND id = $2 AND status = $3 RETURNING id`, [clientId, id, from, to]);
    return rows.length === 1;
  }

  /** An operator marked a refund that required attention failed: its amount goes back to the payment in the same statement. */
  async failRefundByOperator(clientId: string, id: string, reason: string): Promise<RefundRow | undefined> {
    const [row] = await this.rows<RefundRow>(
      `WITH failed AS (
         UPDATE refunds SET status = 'failed', failure_reason = $3
          WHERE client_id = $1 AND id = $2 AND status = 'requires_attention'
          RETURNING ${REFUND_COLUMNS}),
       given_back AS (
         UPDATE payments p SET amount_refunded = p.amount_refunded - f.amount
           FROM failed f WHERE p.client_id = $1 AND p.id = f.payment_id)
       SELECT * FROM failed`,
      [clientId, id, reason],
    );
    return row;
  }

  /** The card network made no refund (its own word): the reservation is given back. */
  async cancelRefund(clientId: string, id: string): Promise<void> {
    await this.rows(
      `WITH gone AS (
         DELETE FROM refunds WHERE client_id = $1 AND id = $2 AND status = 'processing' RETURNING payment_id, amount)
       UPDATE payments p SET amount_refunded = p.amount_refunded - gone.amount
         FROM gone WHERE p.client_id = $1 AND p.id = gone.payment_id`,
      [clientId, id],
    );
  }

  /**
   * Newest first, older than the item `afterId` when given (see SqlRepository.page).
   * From a read replica when there is one: a listing may lag behind a 201 by the
   * replica's delay (the README's "Read replicas").
   */
  listPage(clientId: string, limit: number, afterId?: string): Promise<PaymentRow[]> {
    return this.page<PaymentRow>('payments', COLUMNS, clientId, limit, afterId, 'replica');
  }
}
