/**
 * Typed helpers for the orders and payments endpoints, on top of the generic
 * retrying client. Every state-changing helper is a POST, so it carries an
 * Idempotency-Key (random by default, or yours via `options.idempotencyKey`,
 * e.g. from `keyFor`).
 *
 * Money is always an integer amount of the currency's minor unit (cents for EUR,
 * yen for JPY), never a float.
 *
 * The paths (`/orders`, `/orders/{id}/cancel`, `/payments`, `/payments/{id}/refunds`)
 * are the API of the README; keep them in step with the controllers.
 */
import { IdempotentClient, type ClientResponse, type GetOptions, type PostOptions } from './idempotent-client';

/** An integer amount in the currency's minor unit (e.g. 1250 = EUR 12.50). */
export type MinorUnits = number;

/** An ISO 4217 currency code, e.g. `usd`: the server accepts any case and answers in lower case. */
export type CurrencyCode = string;

export interface OrderItem {
  sku: string;
  /** A positive integer. */
  quantity: number;
  unit_amount: MinorUnits;
}

export type OrderStatus = 'pending' | 'paid' | 'canceled';

export interface Order {
  id: string;
  status: OrderStatus;
  currency: CurrencyCode;
  amount_total: MinorUnits;
  items: OrderItem[];
  /** ISO 8601 timestamp. */
  created_at: string;
}

export interface CreateOrderRequest {
  currency: CurrencyCode;
  items: OrderItem[];
}

export type PaymentStatus = 'succeeded' | 'failed';

export interface Payment {
  id: string;
  status: PaymentStatus;
  amount: MinorUnits;
  currency: CurrencyCode;
  order_id: string | null;
  description: string | null;
  amount_refunded: MinorUnits;
  /** ISO 8601 timestamp. */
  created_at: string;
  /** Why the card network declined, when `status` is `failed`. */
  failure_code?: string | null;
}

export interface CreatePaymentRequest {
  amount: MinorUnits;
  currency: CurrencyCode;
  /** A payment source token, e.g. a card token. */
  source: string;
  order_id?: string;
  description?: string;
}

export interface Refund {
  id: string;
  payment_id: string;
  amount: MinorUnits;
  /** ISO 8601 timestamp. */
  created_at: string;
}

export interface RefundRequest {
  /** Defaults (server side) to the amount not yet refunded. */
  amount?: MinorUnits;
}

/**
 * The payments API client: {@link IdempotentClient} plus one typed method per
 * endpoint. Each resolves to the full {@link ClientResponse}, so `replayed` and
 * `attempts` stay visible.
 *
 * @example
 * ```ts
 * const payments = new PaymentsClient({ baseUrl, apiKey });
 * const idempotencyKey = await keyFor('pay-order', order.id);
 * const { body: payment } = await payments.createPayment(
 *   { amount: order.amount_total, currency: order.currency, source: 'tok_visa', order_id: order.id },
 *   { idempotencyKey },
 * );
 * ```
 */
export class PaymentsClient extends IdempotentClient {
  /** `POST /orders` */
  async createOrder(input: CreateOrderRequest, options?: PostOptions): Promise<ClientResponse<Order>> {
    return this.post<Order>('/orders', input, options);
  }

  /** `POST /orders/{id}/cancel` */
  async cancelOrder(orderId: string, options?: PostOptions): Promise<ClientResponse<Order>> {
    return this.post<Order>(`/orders/${segment(orderId)}/cancel`, {}, options);
  }

  /** `GET /orders/{id}` */
  async getOrder(orderId: string, options?: GetOptions): Promise<ClientResponse<Order>> {
    return this.get<Order>(`/orders/${segment(orderId)}`, options);
  }

  /** `POST /payments` */
  async createPayment(input: CreatePaymentRequest, options?: PostOptions): Promise<ClientResponse<Payment>> {
    return this.post<Payment>('/payments', input, options);
  }

  /** `GET /payments/{id}` */
  async getPayment(paymentId: string, options?: GetOptions): Promise<ClientResponse<Payment>> {
    return this.get<Payment>(`/payments/${segment(paymentId)}`, options);
  }

  /** `POST /payments/{id}/refunds`; omit `amount` to refund the remainder. */
  async refundPayment(paymentId: string, input: RefundRequest = {}, options?: PostOptions): Promise<ClientResponse<Refund>> {
    return this.post<Refund>(`/payments/${segment(paymentId)}/refunds`, input, options);
  }
}

/** An id as one path segment: `../x` or `a/b` must not reach another route. */
function segment(id: string): string {
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('An id must be a non-empty string');
  // encodeURIComponent leaves dots alone, and URL parsing resolves `.` and `..`.
  if (id === '.' || id === '..') throw new TypeError(`Invalid id "${id}"`);
  return encodeURIComponent(id);
}
