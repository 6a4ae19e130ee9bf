// Generated from the OpenAPI document by scripts/openapi-client-types.mjs; do not edit (npm run client:types)

export interface CreateOrderDto {
  /** ISO 4217 code, any case; stored lower-case */
  currency: string;
  /** The total (sum of quantity × unit_amount) must be payable: 1 to 99999999 minor units */
  items: OrderItemDto[];
}

export interface CreatePaymentDto {
  /** Integer minor units (cents), at least the card network's minimum charge in the currency (usd 50, aed 200, aud 50, bgn 100, brl 50, cad 50, chf 50, czk 1500, dkk 250, eur 50, gbp 30, hkd 400, huf 17500, inr 50, jpy 50, mxn 1000, myr 200, nok 300, nzd 50, pln 200, ron 200, sek 300, sgd 50, thb 1000; 1 in other currencies) */
  amount: number;
  /** ISO 4217 code the card network charges in, any case; stored lower-case */
  currency: string;
  /** A card token or PaymentMethod id from the card network, never card details: a real token (tok_ and a digit, as Stripe.js makes them: tok_1N3T00LkdIwHu7ix), a real PaymentMethod (pm_1…), a test token (tok_ and letters: tok_visa) or test PaymentMethod (pm_card_visa). Anything else, and any value holding a card number (13–19 digits passing the Luhn check, with or without separators), is refused (400) and neither stored, sent nor logged. Test tokens: tok_visa (succeeds), tok_chargeDeclined (402 card_declined), tok_chargeDeclinedInsufficientFunds (402 insufficient_funds), tok_processingError (502, key released), tok_refundPending / tok_refundPendingFail / tok_refundFail (charge; their refunds answer pending then succeed, pending then fail, succeeded then fail). The fault tokens tok_chargeThenDrop, tok_chargeThenHang and tok_chargeThenError are accepted only while the bundled simulator is the card network. */
  source: string;
  /**
   * Pay this pending order: amount and currency must match it
   * Format: uuid
   */
  order_id?: string;
  /** Stored, returned and sent to the card network: never card data (a card number is refused, 400) */
  description?: string;
}

export interface CreateRefundDto {
  /** Minor units; default: what remains unrefunded */
  amount?: number;
}

export interface KeyOutcomeResponse {
  /** The key, normalised (a quoted form is unquoted) */
  key: string;
  /** unknown: no operation of yours has this key (never received, or its retention ran out: it is new again); in_progress: it is running, or its outcome is not known yet (retry it with the same body to resume it); completed: it ended, and a retry with the same body replays its response */
  state: 'unknown' | 'in_progress' | 'completed';
  /** completed: the status of the stored response */
  status?: number;
  /**
   * completed: when the stored response stops being kept (database clock)
   * Format: date-time
   */
  expires_at?: string;
  /** in_progress: seconds until a retry may take the operation over (0: now) */
  retry_after?: number;
}

export interface OrderItemDto {
  /** Stored and returned: never card data (a card number is refused, 400) */
  sku: string;
  quantity: number;
  /** Price of one unit in minor units (cents) */
  unit_amount: number;
}

export interface OrderPage {
  object: 'list';
  data: OrderResponse[];
  has_more: boolean;
  /** Pass as starting_after for the next page */
  next_cursor: string | null;
}

export interface OrderResponse {
  /** Format: uuid */
  id: string;
  status: 'pending' | 'paid' | 'canceled';
  currency: string;
  /** Sum of quantity x unit_amount, in minor units */
  amount_total: number;
  items: OrderItemDto[];
  /** Format: date-time */
  created_at: string;
}

export interface PaymentPage {
  object: 'list';
  data: PaymentResponse[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface PaymentResponse {
  /** Format: uuid */
  id: string;
  /** processing: the card network has been (or is being) asked and the outcome is not recorded yet; it ends succeeded or failed */
  status: 'processing' | 'succeeded' | 'failed';
  /** Minor units */
  amount: number;
  currency: string;
  /** Format: uuid */
  order_id: string | null;
  description: string | null;
  /** Minor units refunded so far, refunds in processing included */
  amount_refunded: number;
  /** Why a failed payment failed */
  failure_code: 'card_declined' | 'insufficient_funds' | 'authentication_required' | 'canceled' | null;
  /** Format: date-time */
  created_at: string;
  /** GET /payments/{id} only */
  refunds?: RefundResponse[];
}

/** RFC 9457 problem details (application/problem+json) */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  /** validation_failed only: the failing fields */
  errors?: {
    field?: string;
    messages?: string[];
  }[];
}

export interface RefundResponse {
  /** Format: uuid */
  id: string;
  /** Format: uuid */
  payment_id: string;
  /** Minor units */
  amount: number;
  /** processing: reserved, the card network has not answered yet; pending: the card network has the refund and has not settled it (most refunds settle within days; a webhook or the settlement job moves it on); succeeded; failed: the card network could not refund it and its amount is refundable again (failure_reason says why) */
  status: 'processing' | 'pending' | 'succeeded' | 'failed';
  /** The card network's reason, when the refund failed */
  failure_reason: string | null;
  /** Format: date-time */
  created_at: string;
}
