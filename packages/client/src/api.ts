/**
 * Typed helpers for the orders and payments endpoints, on top of the generic
 * retrying client. Every state-changing helper is a POST, so it carries an
 * Idempotency-Key (random by default, or yours via `options.idempotencyKey`,
 * e.g. from `keyFor`).
 *
 * The request and response shapes are not written here: they are the server's,
 * as its OpenAPI document (/docs-json) states them (api-types.ts, from
 * api.generated.ts). After changing a DTO or a route, run `npm run client:types`
 * (it boots the app against a throwaway database, reads /docs-json and rewrites
 * api.generated.ts with openapi-typescript; test/e2e/client-types.spec.ts fails
 * until the committed file matches). Each helper's path is one of the
 * document's (`ApiPath`), its `{id}` filled in: a route renamed on the server
 * breaks this file's compile.
 */
import type {
  ApiPath,
  CreateOrderRequest,
  CreatePaymentRequest,
  Order,
  Payment,
  Refund,
  RefundRequest,
} from './api-types';
import { IdempotentClient } from './idempotent-client';
import type { ClientResponse, GetOptions, PostOptions } from './client-options';

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
    return this.post<Order>(route('/orders'), input, options);
  }

  /** `POST /orders/{id}/cancel` */
  async cancelOrder(orderId: string, options?: PostOptions): Promise<ClientResponse<Order>> {
    return this.post<Order>(route('/orders/{id}/cancel', orderId), {}, options);
  }

  /** `GET /orders/{id}` */
  async getOrder(orderId: string, options?: GetOptions): Promise<ClientResponse<Order>> {
    return this.get<Order>(route('/orders/{id}', orderId), options);
  }

  /** `POST /payments` */
  async createPayment(input: CreatePaymentRequest, options?: PostOptions): Promise<ClientResponse<Payment>> {
    return this.post<Payment>(route('/payments'), input, options);
  }

  /** `GET /payments/{id}` */
  async getPayment(paymentId: string, options?: GetOptions): Promise<ClientResponse<Payment>> {
    return this.get<Payment>(route('/payments/{id}', paymentId), options);
  }

  /** `POST /payments/{id}/refunds`; omit `amount` to refund the remainder. */
  async refundPayment(paymentId: string, input: RefundRequest = {}, options?: PostOptions): Promise<ClientResponse<Refund>> {
    return this.post<Refund>(route('/payments/{id}/refunds', paymentId), input, options);
  }
}

/** A path of the document with its `{id}` filled in, as one path segment. */
function route(path: ApiPath, id?: string): string {
  return path.includes('{id}') ? path.replace('{id}', () => segment(id)) : path;
}

/** An id as one path segment: `../x` or `a/b` must not reach another route. */
function segment(id: string | undefined): string {
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('An id must be a non-empty string');
  // encodeURIComponent leaves dots alone, and URL parsing resolves `.` and `..`.
  if (id === '.' || id === '..') throw new TypeError(`Invalid id "${id}"`);
  return encodeURIComponent(id);
}
