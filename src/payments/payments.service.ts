import { Injectable } from '@nestjs/common';
import { Page, PageQueryDto, keysetPage } from '../common/pagination';
import { problems } from '../common/problem';
import { violatedConstraint } from '../database/database-errors';
import { IdempotencyContext } from '../idempotency/idempotency.context';
import { OrdersService } from '../orders/orders.service';
import { CardNetwork, CardNetworkError, ChargeResult, InvalidSourceError } from './card-network/card-network';
import { CreatePaymentDto, CreateRefundDto } from './dto/create-payment.dto';
import { PaymentResponse, RefundResponse } from './dto/payment.response';
import {
  AmountMismatchException,
  CardNetworkFailedException,
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
  return { id: row.id, payment_id: row.payment_id, amount: Number(row.amount), created_at: row.created_at.toISOString() };
}

/**
 * The rules of payments and refunds. Runs inside the transaction the
 * idempotency interceptor opened: the payment, the order's move to "paid" and
 * the stored response commit together, or not at all.
 */
@Injectable()
export class PaymentsService {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly orders: OrdersService,
    private readonly cardNetwork: CardNetwork,
    private readonly idempotency: IdempotencyContext,
  ) {}

  async create(clientId: string, dto: CreatePaymentDto): Promise<PaymentResponse> {
    const currency = dto.currency.toLowerCase();
    const orderId = dto.order_id?.toLowerCase() ?? null;
    if (orderId) await this.checkPayable(clientId, orderId, dto.amount, currency);

    const charge = await this.charge(clientId, dto.amount, currency, dto.source);
    const base = { orderId, amount: dto.amount, currency, description: dto.description ?? null };
    if (charge.status === 'declined') {
      const failed = await this.payments.insert(clientId, { ...base, status: 'failed', failureCode: charge.declineCode, networkChargeId: null });
      throw new PaymentDeclinedException(charge.declineCode, failed.id);
    }
    try {
      const payment = await this.payments.insert(clientId, { ...base, status: 'succeeded', failureCode: null, networkChargeId: charge.chargeId });
      if (orderId) await this.orders.markPaid(clientId, orderId);
      return toPaymentResponse(payment);
    } catch (error) {
      if (orderId && violatedConstraint(error) === 'payments_one_success_per_order') throw new OrderPaymentConflictException(orderId);
      throw error;
    }
  }

  /** Locks the order until commit, so two payments of it (under any keys) serialise. */
  private async checkPayable(clientId: string, orderId: string, amount: number, currency: string): Promise<void> {
    const order = await this.orders.lockForPayment(clientId, orderId);
    if (!order) throw new OrderNotPayableException(orderId, 'does not exist');
    if (order.status !== 'pending') throw new OrderNotPayableException(orderId, `is ${order.status}`);
    if (order.currency !== currency || order.amount_total !== amount) {
      throw new AmountMismatchException(orderId, { amount: order.amount_total, currency: order.currency });
    }
  }

  private async charge(clientId: string, amount: number, currency: string, source: string): Promise<ChargeResult> {
    try {
      return await this.cardNetwork.charge({ clientId, amount, currency, source, idempotencyKey: this.idempotency.key });
    } catch (error) {
      if (error instanceof InvalidSourceError) {
        throw problems.validationFailed([{ field: 'source', messages: ['source must be a known card token (e.g. tok_visa)'] }]);
      }
      if (error instanceof CardNetworkError) throw new CardNetworkFailedException();
      throw error;
    }
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

  /** Refunds serialise on the payment's row lock; the total never exceeds the payment. */
  async refund(clientId: string, paymentId: string, dto: CreateRefundDto): Promise<RefundResponse> {
    const payment = await this.payments.findForUpdate(clientId, paymentId);
    if (!payment) throw problems.notFound(`No payment ${paymentId}.`);
    if (payment.status !== 'succeeded') throw new PaymentNotRefundableException(paymentId);
    const remaining = Number(payment.amount) - Number(payment.amount_refunded);
    const amount = dto.amount ?? remaining;
    if (amount <= 0 || amount > remaining) throw new RefundExceedsPaymentException(paymentId, remaining);
    return toRefundResponse(await this.payments.addRefund(clientId, paymentId, amount));
  }
}
