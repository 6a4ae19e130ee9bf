/**
 * The objects the network keeps and answers with, shaped as Stripe's:
 * PaymentIntents, Refunds and card tokens, and what each account knows beside them.
 */

export type Metadata = Record<string, string>;

export const PAYMENT_INTENT_STATUSES = [
  'requires_payment_method',
  'requires_confirmation',
  'requires_action',
  'processing',
  'succeeded',
  'canceled',
] as const;
export type PaymentIntentStatus = (typeof PAYMENT_INTENT_STATUSES)[number];

export interface PaymentError {
  type: 'card_error';
  code: 'card_declined' | 'processing_error' | 'authentication_required';
  decline_code?: string;
  message: string;
}

export interface PaymentIntent {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  currency: string;
  status: PaymentIntentStatus;
  payment_method: string;
  confirmation_method: 'automatic';
  description: string | null;
  metadata: Metadata;
  created: number;
  latest_charge: string | null;
  last_payment_error: PaymentError | null;
  next_action: { type: 'use_stripe_sdk'; use_stripe_sdk: { type: 'three_d_secure_redirect' } } | null;
  canceled_at: number | null;
  cancellation_reason: string | null;
  livemode: false;
}

export const REFUND_STATUSES = ['pending', 'succeeded', 'failed', 'canceled'] as const;
export type RefundStatus = (typeof REFUND_STATUSES)[number];

export interface Refund {
  id: string;
  object: 'refund';
  amount: number;
  charge: string | null;
  currency: string;
  payment_intent: string;
  status: RefundStatus;
  /** Only on a failed refund, as Stripe shows it. */
  failure_reason?: 'declined';
  metadata: Metadata;
  created: number;
}

/** An intent and how much of it is refunded (pending refunds included, failed ones not). */
export interface IntentRecord {
  intent: PaymentIntent;
  refunded: number;
}

/** A card token (POST /v1/tokens) as Stripe answers it. */
export interface CardToken {
  id: string;
  object: 'token';
  card: {
    id: string;
    object: 'card';
    brand: string;
    country: 'US';
    cvc_check: 'unchecked' | null;
    exp_month: number;
    exp_year: number;
    funding: 'credit';
    last4: string;
    metadata: Record<string, string>;
    name: null;
  };
  client_ip: null;
  created: number;
  livemode: false;
  type: 'card';
  used: boolean;
}

/** A card token as an account keeps it (tokens.ts makes them). */
export interface TokenRecord {
  token: CardToken;
  /** The test payment method whose behaviour the card has. */
  method: string;
}
