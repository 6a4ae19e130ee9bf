import { Injectable, OnModuleInit } from '@nestjs/common';
import { Page, PageQueryDto, keysetPage } from '../common/pagination';
import { problems } from '../common/problem';
import { violatedConstraint } from '../database/database-errors';
import { IdempotencyRecovery, PhasedOperation } from '../idempotency';
import { OrdersService } from '../orders/orders.service';
import {
  CardNetwork,
  CardNetworkRejectedError,
  CardNetworkUnavailableError,
  ChargeResult,
  InvalidSourceError,
  RefundResult,
} from './card-network/card-network';
import { CreatePaymentDto, CreateRefundDto } from './dto/create-payment.dto';
import { PaymentResponse, RefundResponse } from './dto/payment.response';
import {
  AmountMismatchException,
  CardNetworkFailedException,
  CardNetworkUnavailableException,
  OrderNotPayableException,
  OrderPaymentConflictException,
  PaymentDeclinedException,
  PaymentNotRefundableException,
  RefundExceedsPaymentException,
} from './payments.errors';
import { PaymentRow, PaymentsRepository, RefundRow } from './payments.repository';

export function toPaymentResponse(row: PaymentRow): PaymentResponse {
  return {
    id: row.id,
    status: row.status,
    amount: Number(row.amount),
    currency: row.currency,
    order_id: row.order_id,
    description: row.description,
    amount_refunded: Number(row.amount_refunded),
    failure_code: row.failure_code,
    created_at: row.created_at.toISOString(),
  };
}

function toRefundResponse(row: RefundRow): RefundResponse {
  return { id: row.id, payment_id: row.payment_id, amount: Number(row.amount), status: row.status, created_at: row.created_at.toISOString() };
}

/** What a payment's Start phase saves with its recovery point. */
interface PaymentState {
  payment_id: string;
}

/** What a refund's Start phase saves with its recovery point. */
interface RefundState {
  refund_id: string;
}

export type PaymentOperation = PhasedOperation<PaymentState>;
export type RefundOperation = PhasedOperation<RefundState>;

/** The operation names under which the recovery job resumes them. */
export const PAYMENT_OPERATION = 'payments.create';
export const REFUND_OPERATION = 'payments.refund';
const STARTED = 'started';

/**
 * The rules of payments and refunds. Both reach the card network, so both run
 * in atomic phases (PhasedOperation): Start (validate, reserve, record as
 * processing, one transaction) -> the card network call (no transaction, no
 * lock, our own idempotency key) -> Finish (record the outcome, store the
 * response, one transaction). Any later attempt, or the recovery job, resumes a
 * started operation with the same payment and the same network key, so the
 * network's idempotency makes the repeated call the same charge.
 */
@Injectable()
export class PaymentsService implements OnModuleInit {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly orders: OrdersService,
    private readonly cardNetwork: CardNetwork,
    private readonly recovery: IdempotencyRecovery,
  ) {}

  onModuleInit(): void {
    this.recovery.register(PAYMENT_OPERATION, (op) => this.resumePayment(op as PaymentOperation));
    this.recovery.register(REFUND_OPERATION, (op) => this.resumeRefund(op as RefundOperation));
  }

  async create(clientId: string, dto: CreatePaymentDto, op: PaymentOperation): Promise<PaymentResponse> {
    if (op.recoveryPoint === STARTED) return this.resumePayment(op);
    const payment = await op.checkpoint(STARTED, () => this.start(clientId, dto), (p) => ({ payment_id: p.id }));
    return this.chargeAndFinish(op, payment);
  }

  /** Start: everything the database would refuse is refused here, before the network sees anything. */
  private async start(clientId: string, dto: CreatePaymentDto): Promise<PaymentRow> {
    const currency = dto.currency.toLowerCase();
    const orderId = dto.order_id?.toLowerCase() ?? null;
    if (orderId) {
      await this.checkPayable(clientId, orderId, dto.amount, currency);
      // Asked under the order's lock, before inserting: an insert that met another
      // payment's uncommitted Finish in the unique index would wait on it while
      // holding the lock that Finish needs (a deadlock).
      if (await this.orders.hasPaymentInProgress(clientId, orderId)) throw new OrderPaymentConflictException(orderId);
    }
    try {
      return await this.payments.insertProcessing(clientId, {
        orderId,
        amount: dto.amount,
        currency,
        description: dto.description ?? null,
        paymentMethod: dto.source,
      });
    } catch (error) {
      if (orderId && violatedConstraint(error) === 'payments_one_active_per_order') throw new OrderPaymentConflictException(orderId);
      throw error;
    }
  }

  /** Locks the order until Start commits, so two payments of it (under any keys) serialise. */
  private async checkPayable(clientId: string, orderId: string, amount: number, currency: string): Promise<void> {
    const order = await this.orders.lockForPayment(clientId, orderId);
    if (!order) throw new OrderNotPayableException(orderId, 'does not exist');
    if (order.status !== 'pending') throw new OrderNotPayableException(orderId, `is ${order.status}`);
    if (order.currency !== currency || order.amount_total !== amount) {
      throw new AmountMismatchException(orderId, { amount: order.amount_total, currency: order.currency });
    }
  }

  private async resumePayment(op: PaymentOperation): Promise<PaymentResponse> {
    const payment = op.state && (await this.payments.find(op.scope, op.state.payment_id));
    if (!payment || payment.status !== 'processing') {
      throw new Error(`cannot resume payment ${op.state?.payment_id}: ${payment ? payment.status : 'missing'}`);
    }
    return this.chargeAndFinish(op, payment);
  }

  private async chargeAndFinish(op: PaymentOperation, payment: PaymentRow): Promise<PaymentResponse> {
    let charge: ChargeResult;
    try {
      charge = await this.cardNetwork.charge({
        amount: Number(payment.amount),
        currency: payment.currency,
        source: payment.payment_method ?? '',
        description: payment.description,
        // Ours, not the client's key: unique across clients, the same on every resume.
        idempotencyKey: `payment_${payment.id}`,
        metadata: { payment_id: payment.id, ...(payment.order_id ? { order_id: payment.order_id } : {}) },
      });
    } catch (error) {
      if (error instanceof InvalidSourceError || error instanceof CardNetworkRejectedError) {
        // The network did nothing: no payment stays, and the key is free for a retry.
        await op.release(() => this.payments.deleteProcessing(op.scope, payment.id));
        throw error instanceof InvalidSourceError
          ? problems.validationFailed([{ field: 'source', messages: ['source must be a known card token (e.g. tok_visa)'] }])
          : new CardNetworkFailedException();
      }
      if (error instanceof CardNetworkUnavailableError) throw new CardNetworkUnavailableException();
      throw error;
    }
    return op.finish(
      async () => {
        const settled = await this.payments.settle(op.scope, payment.id, {
          status: charge.status === 'succeeded' ? 'succeeded' : 'failed',
          failureCode: charge.status === 'declined' ? charge.declineCode : null,
          networkChargeId: charge.chargeId,
        });
        if (!settled) throw new Error(`payment ${payment.id} was no longer processing`);
        if (charge.status === 'declined') throw new PaymentDeclinedException(charge.declineCode, settled.id);
        if (settled.order_id) await this.orders.markPaid(op.scope, settled.order_id);
        return toPaymentResponse(settled);
      },
      { location: (p) => `/payments/${p.id}` },
    );
  }

  async get(clientId: string, id: string): Promise<PaymentResponse> {
    const row = await this.payments.find(clientId, id);
    if (!row) throw problems.notFound(`No payment ${id}.`);
    const refunds = await this.payments.refunds(clientId, id);
    return { ...toPaymentResponse(row), refunds: refunds.map(toRefundResponse) };
  }

  list(clientId: string, query: PageQueryDto): Promise<Page<PaymentResponse>> {
    return keysetPage(
      query,
      {
        exists: async (id) => (await this.payments.find(clientId, id)) !== undefined,
        fetch: (limit, afterId) => this.payments.listPage(clientId, limit, afterId),
      },
      toPaymentResponse,
    );
  }

  async refund(clientId: string, paymentId: string, dto: CreateRefundDto, op: RefundOperation): Promise<RefundResponse> {
    if (op.recoveryPoint === STARTED) return this.resumeRefund(op);
    const refund = await op.checkpoint(STARTED, () => this.reserveRefund(clientId, paymentId, dto), (r) => ({ refund_id: r.id }));
    return this.refundAndFinish(op, refund);
  }

  /** Refunds serialise on the payment's row lock; reserved refunds count, so the total never exceeds the payment. */
  private async reserveRefund(clientId: string, paymentId: string, dto: CreateRefundDto): Promise<RefundRow> {
    const payment = await this.payments.findForUpdate(clientId, paymentId);
    if (!payment) throw problems.notFound(`No payment ${paymentId}.`);
    if (payment.status !== 'succeeded') throw new PaymentNotRefundableException(paymentId);
    const remaining = Number(payment.amount) - Number(payment.amount_refunded);
    const amount = dto.amount ?? remaining;
    if (amount <= 0 || amount > remaining) throw new RefundExceedsPaymentException(paymentId, remaining);
    return this.payments.reserveRefund(clientId, paymentId, amount);
  }

  private async resumeRefund(op: RefundOperation): Promise<RefundResponse> {
    const refund = op.state && (await this.payments.findRefund(op.scope, op.state.refund_id));
    if (!refund || refund.status !== 'processing') {
      throw new Error(`cannot resume refund ${op.state?.refund_id}: ${refund ? refund.status : 'missing'}`);
    }
    return this.refundAndFinish(op, refund);
  }

  private async refundAndFinish(op: RefundOperation, refund: RefundRow): Promise<RefundResponse> {
    const payment = await this.payments.find(op.scope, refund.payment_id);
    if (!payment?.network_charge_id) throw new Error(`payment ${refund.payment_id} has no charge at the card network`);
    let made: RefundResult;
    try {
      made = await this.cardNetwork.refund({
        chargeId: payment.network_charge_id,
        amount: Number(refund.amount),
        idempotencyKey: `refund_${refund.id}`,
        metadata: { refund_id: refund.id, payment_id: payment.id },
      });
    } catch (error) {
      if (error instanceof CardNetworkRejectedError) {
        await op.release(() => this.payments.cancelRefund(op.scope, refund.id));
        throw new CardNetworkFailedException();
      }
      if (error instanceof CardNetworkUnavailableError) throw new CardNetworkUnavailableException();
      throw error;
    }
    return op.finish(
      async () => {
        const settled = await this.payments.settleRefund(op.scope, refund.id, made.refundId);
        if (!settled) throw new Error(`refund ${refund.id} was no longer processing`);
        return toRefundResponse(settled);
      },
      { location: (r) => `/payments/${r.payment_id}` },
    );
  }
}
