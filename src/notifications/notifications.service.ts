import { Injectable } from '@nestjs/common';
import { Outbox } from 'safe-retries/outbox';
import { OrdersService } from '../orders/orders.service';
import { ConfirmationLimits } from './confirmation-limits';
import { ORDER_CONFIRMATION_TOPIC } from './confirmation-publisher';
import { OrderConfirmationResponse, SendOrderConfirmationDto } from './dto/order-confirmation.dto';
import { Notification } from './notifier';

@Injectable()
export class NotificationsService {
  constructor(
    private readonly orders: OrdersService,
    private readonly outbox: Outbox,
    private readonly limits: ConfirmationLimits,
  ) {}

  /**
   * Queues the confirmation of one of the client's orders in the outbox, in
   * the transaction that stores the request's key (404 for another's order or
   * none; 429 past the order's or the client's cap, ConfirmationLimits). The
   * relay sends it after the commit, with the message's id as the notifier's
   * idempotency key. No stream: confirmations need no order among themselves,
   * and one that fails should not hold back the next.
   */
  async confirmOrder(clientId: string, orderId: string, dto: SendOrderConfirmationDto): Promise<OrderConfirmationResponse> {
    const order = await this.orders.get(clientId, orderId);
    await this.limits.take(clientId, order.id);
    const total = `${(order.amount_total / 100).toFixed(2)} ${order.currency.toUpperCase()}`;
    const notification: Notification = {
      clientId,
      channel: dto.channel,
      recipient: dto.recipient,
      subject: `Order ${order.id} confirmed`,
      text: `Your order ${order.id} (${order.items.length} items, ${total}) is ${order.status}.`,
    };
    const id = await this.outbox.add({ topic: ORDER_CONFIRMATION_TOPIC, payload: notification });
    return { id, order_id: order.id, channel: dto.channel, recipient: dto.recipient };
  }
}
