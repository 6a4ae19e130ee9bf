import { Injectable } from '@nestjs/common';
import { violatedConstraint } from '../../database/database-errors';
import { OrdersService } from '../../orders/orders.service';
import { CreatePaymentDto } from '../model/dto/create-payment.dto';
import { PaymentOperation, STARTED } from '../model/payment-operations';
import { AmountMismatchException, OrderNotPayableException, OrderPaymentConflictException } from '../model/payments.errors';
import { PaymentRow, PaymentsRepository } from '../model/payments.repository';

/**
 * A payment's Start phase (in its transaction, before the card network sees
 * anything): the order checked and locked, the payment inserted `processing`,
 * reserving the order, committed with the recovery point STARTED.
 */
@Injectable()
export class PaymentStart {
  constructor(
    private readonly payments: PaymentsRepository,
    private readonly orders: OrdersService,
  ) {}

  /** Start: the payment recorded `processing` under the operation's key; from here on a retry resumes it. */
  start(op: PaymentOperation, clientId: string, dto: CreatePaymentDto): Promise<PaymentRow> {
    return op.checkpoint(STARTED, () => this.insert(clientId, dto, op.key), (p) => ({ payment_id: p.id }));
  }

  /** Everything the database would refuse is refused here, before the network sees anything. */
  private async insert(clientId: string, dto: CreatePaymentDto, idempotencyKey: string): Promise<PaymentRow> {
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
        idempotencyKey,
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
}
