/**
 * What every part of the simulator answers with: Stripe's error shape and its
 * ids. Kept apart from the server so that the tokens and money rules can throw
 * the same errors without importing it.
 */
import { randomFillSync } from 'node:crypto';

export interface ErrorBody {
  type: 'invalid_request_error' | 'idempotency_error' | 'api_error' | 'card_error';
  code?: string;
  param?: string;
  message: string;
  decline_code?: string;
  /** The intent a payment error concerns, as Stripe's errors carry it. */
  payment_intent?: object;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: ErrorBody,
  ) {
    super(error.message);
  }
}

export function invalid(message: string, code?: string, param?: string, status = 400): ApiError {
  return new ApiError(status, { type: 'invalid_request_error', ...(code ? { code } : {}), ...(param ? { param } : {}), message });
}

export const noSuch = (kind: string, id: string, param: string, status = 400): ApiError =>
  invalid(`No such ${kind}: '${id}'`, 'resource_missing', param, status);

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Random bytes for ids, drawn from a pool refilled 4 KiB at a time rather than one call per id. */
const idEntropy = Buffer.alloc(4096);
let idEntropyUsed = idEntropy.length;

export function randomId(prefix: string, length: number): string {
  if (idEntropyUsed + length > idEntropy.length) {
    randomFillSync(idEntropy);
    idEntropyUsed = 0;
  }
  let id = prefix;
  for (let i = 0; i < length; i++) id += ALNUM[idEntropy[idEntropyUsed + i] % ALNUM.length];
  idEntropyUsed += length;
  return id;
}

/** Stripe's newer ids: a version digit, then 23 characters (`tok_1N3T00LkdIwHu7ixt44h1F8k`). */
export const stripeId = (prefix: string): string => randomId(`${prefix}1`, 23);

export function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
