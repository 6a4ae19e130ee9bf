import { Injectable } from '@nestjs/common';
import { Page, PageQueryDto, keysetPage } from '../http/pagination';
import { problems } from '../http/problem';
import { EventsService } from '../events/events.service';
import { CreateOrderDto } from './dto/create-order.dto';
import { OrderResponse } from './dto/order.response';
import { OrderNotCancelableException } from './orders.errors';
import { OrderRow, OrdersRepository } from './orders.repository';

export function toOrderResponse(row: OrderRow): OrderResponse {
  return {
    id: row.id,
    status: row.status,
    currency: row.currency,
    amount_total: Number(row.amount_total),
    items: row.items.map((i) => ({ sku: i.sku, quantity: i.quantity, unit_amount: i.unit_amount })),
    created_at: row.created_at.toISOString(),
  };
}

/**
 * The rules of orders. Payments use `lockPayable` and `markPaid` inside their
 * transaction. Each change records its event (order.created, order.canceled,
 * order.paid) in the same transaction.
 */
@Injectable()
export class OrdersService {
  constructor(
    private readonly orders: OrdersRepository,
    private readonly events: EventsService,
  ) {}

  async create(clientId: string, dto: CreateOrderDto): Promise<OrderResponse> {
    const items = dto.items.map((i) => ({ sku: i.sku, quantity: i.quantity, unit_amount: i.unit_amount }));
    const total = items.reduce((sum, i) => sum + i.quantity * i.unit_amount, 0);
    const order = toOrderResponse(await this.orders.insert(clientId, dto.currency.toLowerCase(), total, items));
    await this.events.record(clientId, 'order.created', order);
    return order;
  }

  async get(clientId: string, id: string): Promise<OrderResponse> {
    const row = await this.orders.find(clientId, id);
    if (!row) throw problems.notFound(`No order ${id}.`);
    return toOrderResponse(row);
  }

  list(clientId: string, query: PageQueryDto): Promise<Page<OrderResponse>> {
    return keysetPage(
      query,
      {
        exists: async (id) => (await this.orders.find(clientId, id)) !== undefined,
        fetch: (limit, afterId) => this.orders.listPage(clientId, limit, afterId),
      },
      toOrderResponse,
    );
  }

  /**
   * Only a pending order with no payment in progress can be canceled: a payment
   * reserves its order while the card network is asked. The row lock waits for a
   * payment's Start phase to commit, and the check that follows then sees it.
   */
  async cancel(clientId: string, id: string): Promise<OrderResponse> {
    const row = await this.orders.findForUpdate(clientId, id);
    if (!row) throw problems.notFound(`No order ${id}.`);
    if (row.status !== 'pending') throw new OrderNotCancelableException(id, row.status);
    if (await this.orders.hasPaymentInProgress(clientId, id)) throw new OrderNotCancelableException(id, 'being paid');
    const canceled = await this.orders.transition(clientId, id, 'canceled');
    if (!canceled) throw new Error(`order ${id} changed under its row lock`);
    const order = toOrderResponse(canceled);
    await this.events.record(clientId, 'order.canceled', order);
    return order;
  }

  /** The caller's order, locked until the transaction ends, or undefined. */
  async lockForPayment(clientId: string, id: string): Promise<OrderResponse | undefined> {
    const row = await this.orders.findForUpdate(clientId, id);
    return row && toOrderResponse(row);
  }

  /** Whether a payment of the order is between its Start and Finish phases. */
  hasPaymentInProgress(clientId: string, id: string): Promise<boolean> {
    return this.orders.hasPaymentInProgress(clientId, id);
  }

  async markPaid(clientId: string, id: string): Promise<void> {
    const paid = await this.orders.transition(clientId, id, 'paid');
    if (!paid) throw new Error(`order ${id} was not pending when marked paid`);
    await this.events.record(clientId, 'order.paid', toOrderResponse(paid));
  }
}
