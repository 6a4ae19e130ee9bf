/**
 * Typed helpers for the orders and payments endpoints, on top of the generic
 * retrying client. Every state-changing helper is a POST, so it carries an
 * Idempotency-Key (random by default, or yours via `options.idempotencyKey`,
 * e.g. from `keyFor`).
 *
 * Money is always an integer amount of the currency's minor unit (cents for EUR,
 * yen for JPY), never a float.
 *
 * The request and response shapes are not written here: they are the server's
 * DTOs, as its OpenAPI document (/docs-json) states them, generated into
 * api.generated.ts by scripts/openapi-client-types.mjs. After changing a DTO, run
 * `npm run client:types` (it boots the app against a throwaway database, reads
 * /docs-json and rewrites api.generated.ts; test/e2e/client-types.spec.ts fails
 * until the committed file matches). Against a running server, the same:
 * `curl -s localhost:3000/docs-json | node scripts/openapi-client-types.mjs - src/client/api.generated.ts`.
 * The names below are the client's public ones: a renamed DTO changes only its alias here.
 *
 * The paths (`/orders`, `/orders/{id}/cancel`, `/payments`, `/payments/{id}/refunds`)
 * are the API of the README; keep them in step with the controllers.
 */
import type {
  CreateOrderDto,
  CreatePaymentDto,
  CreateRefundDto,
  OrderItemDto,
  OrderResponse,
  PaymentResponse,
  RefundResponse,
} from './api.generated';
import { IdempotentClient, type ClientResponse, type GetOptions, type PostOptions } from './idempotent-client';

/** An integer amount in the currency's minor unit (e.g. 1250 = EUR 12.50). */
export type MinorUnits = number;

/** An ISO 4217 currency code, e.g. `usd`: the server accepts any case and answers in lower case. */
export type CurrencyCode = string;

export type OrderItem = OrderItemDto;
export type Order = OrderResponse;
export type OrderStatus = Order['status'];
export type CreateOrderRequest = CreateOrderDto;

export type Payment = PaymentResponse;
export type PaymentStatus = Payment['status'];
export type CreatePaymentRequest = CreatePaymentDto;

export type Refund = RefundResponse;
export type RefundStatus = Refund['status'];
export type RefundRequest = CreateRefundDto;

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
