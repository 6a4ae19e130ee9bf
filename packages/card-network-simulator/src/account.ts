/**
 * An account: what one secret key sees. Each has its own ledger (intents,
 * refunds, events, tokens), its saved Idempotency-Key results, its queued
 * faults and held requests, and its side of webhook delivery.
 */
import type { ServerResponse } from 'node:http';
import type { LostAnswerFault, Refusal, SimulatorFault } from './faults';
import type { ParsedParams } from './params';
import type { IntentRecord, Refund, TokenRecord } from './resources';
import { SimulatorEvent, WebhookChannel } from './webhooks';

export type KeyEntry =
  | { state: 'in_flight'; fingerprint: string }
  | { state: 'done'; fingerprint: string; status: number; body: string; requestId: string; expiresAt: number };

export interface Account {
  /** Insertion order is creation order: the lists walk these maps backwards. */
  intents: Map<string, IntentRecord>;
  refunds: Map<string, Refund>;
  events: Map<string, SimulatorEvent>;
  tokens: Map<string, TokenRecord>;
  /** PaymentMethods made from a token: id -> the test method whose behaviour the card has. */
  methods: Map<string, string>;
  keys: Map<string, KeyEntry>;
  faults: SimulatorFault[];
  refusals: Refusal[];
  holding: boolean;
  held: Set<PendingPost>;
  webhooks: WebhookChannel;
}

/** Who caused an effect: the request its event names (both null for a change the network made by itself). */
export interface Cause {
  account: Account;
  request: SimulatorEvent['request'];
}

/** What an executed POST answers; `save` says whether it is kept under the key. */
export interface Outcome {
  status: number;
  body: unknown;
  save: boolean;
  fault?: LostAnswerFault;
}

/** A POST to /v1/*, validated, waiting to be executed (at once, or on release). */
export interface PendingPost {
  res: ServerResponse;
  requestId: string;
  /** The request's path: part of the key's fingerprint. */
  path: string;
  params: ParsedParams;
  key: string | undefined;
  /** Validates against the current state (an ApiError leaves no trace), then returns the effect to run. */
  prepare: (cause: Cause) => () => Outcome;
}

export function newAccount(): Account {
  return {
    intents: new Map(),
    refunds: new Map(),
    events: new Map(),
    tokens: new Map(),
    methods: new Map(),
    keys: new Map(),
    faults: [],
    refusals: [],
    holding: false,
    held: new Set(),
    webhooks: new WebhookChannel(),
  };
}
