import { Injectable } from '@nestjs/common';
import { OrdersService } from '../orders/orders.service';
import { ConfirmationLimits } from './confirmation-limits';
import { OrderConfirmationResponse, SendOrderConfirmationDto } from './dto/order-confirmation.dto';
import { Notifier } from './notifier';

@Injectable()
export class NotificationsService {
  constructor(
    private readonly orders: OrdersService,
    private readonly notifier: Notifier,
    private readonly limits: ConfirmationLimits,
  ) {}

  /**
   * Sends the confirmation of one of the client's orders (404 for another's or
   * none; 429 past the order's or the client's cap, ConfirmationLimits).
   */
  async confirmOrder(clientId: string, orderId: string, dto: SendOrderConfirmationDto): Promise<OrderConfirmationResponse> {
    const order = await this.orders.get(clientId, orderId);
    await this.limits.take(clientId, order.id);
    const total = `${(order.amount_total / 100).toFixed(2)} ${order.currency.toUpperCase()}`;
    const sent = await this.notifier.send({
      clientId,
      channel: dto.channel,
      recipient: dto.recipient,
      subject: `Order ${order.id} confirmed`,
      text: `Your order ${order.id} (${order.items.length} items, ${total}) is ${order.status}.`,
    });
    return { id: sent.id, order_id: order.id, channel: sent.channel, recipient: sent.recipient, sent_at: sent.sentAt.toISOString() };
  }
}
