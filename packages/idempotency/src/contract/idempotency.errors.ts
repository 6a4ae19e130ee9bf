import { HttpException } from '@nestjs/common';

/**
 * The idempotency layer's problems: complete RFC 9457 responses on their own,
 * whatever exception filter the app has (or none). With a published policy
 * page (the module's `policyUrl`) their `type` is that page's `#code` and they
 * carry `Link: <policy>; rel="describedby"` (IETF draft
 * draft-ietf-httpapi-idempotency-key-header); without one, `type` is
 * `about:blank` (RFC 9457) and there is no Link, so no answer points at a page
 * the app does not serve. Clients tell problems apart by `code` either way. The interceptor
 * writes them itself (status, `application/problem+json`, headers, body), so
 * they never depend on the app's filter; as an HttpException, `getResponse()`
 * is the same problem body for code that sees one anyway.
 */
export enum IdempotencyErrorCode {
  KeyMissing = 'idempotency_key_missing',
  KeyInvalid = 'idempotency_key_invalid',
  KeyReused = 'idempotency_key_reused',
  InProgress = 'idempotency_request_in_progress',
  LeaseLost = 'idempotency_lease_lost',
  WriteOutsideTransaction = 'idempotency_write_outside_transaction',
  ScopeMissing = 'idempotency_scope_missing',
}

/** RFC 9457 problem details, as the module sends them. */
export interface IdempotencyProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: IdempotencyErrorCode;
}

export const PROBLEM_JSON = 'application/problem+json; charset=utf-8';

export class IdempotencyProblem extends HttpException {
  readonly code: IdempotencyErrorCode;
  /** Response headers that belong to the problem (`Link`, and `Retry-After` on a 409). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    policyUrl: string | undefined,
    status: number,
    code: IdempotencyErrorCode,
    title: string,
    detail: string,
    headers: Record<string, string> = {},
  ) {
    const type = policyUrl === undefined ? 'about:blank' : `${policyUrl}#${code}`;
    const body: IdempotencyProblemBody = { type, title, status, detail, code };
    super(body, status);
    this.name = 'IdempotencyProblem';
    this.code = code;
    this.headers = policyUrl === undefined ? { ...headers } : { Link: `<${policyUrl}>; rel="describedby"`, ...headers };
  }

  override getResponse(): IdempotencyProblemBody {
    return super.getResponse() as IdempotencyProblemBody;
  }
}

export const idempotencyErrors = {
  missing: (policyUrl: string | undefined) =>
    new IdempotencyProblem(
      policyUrl,
      400,
      IdempotencyErrorCode.KeyMissing,
      'Idempotency-Key Missing',
      'This endpoint requires an Idempotency-Key header: one unique value per operation, reused on every retry.',
    ),
  invalid: (policyUrl: string | undefined, reason: string) =>
    new IdempotencyProblem(
      policyUrl,
      400,
      IdempotencyErrorCode.KeyInvalid,
      'Idempotency-Key Invalid',
      `The Idempotency-Key header is invalid: ${reason}. Send 1 to 255 printable ASCII characters, bare or as a quoted string.`,
    ),
  /** A GraphQL operation that selects one keyed mutation field more than once (aliases) under one key. */
  sharedByFields: (policyUrl: string | undefined, field: string, times: number) =>
    new IdempotencyProblem(
      policyUrl,
      422,
      IdempotencyErrorCode.KeyReused,
      'Idempotency-Key Reused',
      `One Idempotency-Key covers one operation, and this request selects ${field} ${times} times (aliases): nothing was run. Send each in a request of its own, with its own key.`,
    ),
  reused: (policyUrl: string | undefined) =>
    new IdempotencyProblem(
      policyUrl,
      422,
      IdempotencyErrorCode.KeyReused,
      'Idempotency-Key Reused',
      'This Idempotency-Key was already used with a different request (method, path, query or body). Use a new key for a new operation.',
    ),
  inProgress: (policyUrl: string | undefined, retryAfterSeconds: number) =>
    new IdempotencyProblem(
      policyUrl,
      409,
      IdempotencyErrorCode.InProgress,
      'Request In Progress',
      'A request with this Idempotency-Key is still being processed. Retry after the delay in Retry-After with the same key and body.',
      { 'Retry-After': String(retryAfterSeconds) },
    ),
  leaseLost: (policyUrl: string | undefined) =>
    new IdempotencyProblem(
      policyUrl,
      409,
      IdempotencyErrorCode.LeaseLost,
      'Lease Lost',
      'This request stalled past its lease (it could not renew it) and another attempt with the same Idempotency-Key took over; its work was rolled back. Retry with the same key to get the result.',
      { 'Retry-After': '1' },
    ),
  /** The app's `scope` gave no principal id for the request (the reason and the fix are in the server's log). */
  scopeMissing: (policyUrl: string | undefined) =>
    new IdempotencyProblem(
      policyUrl,
      500,
      IdempotencyErrorCode.ScopeMissing,
      'Idempotency Scope Missing',
      'The server could not tell which client sent this request, so it cannot keep this Idempotency-Key apart from other clients\' keys. Nothing was run. This is an error in the server\'s configuration; the reason is in its log.',
    ),
  /** A unit of a keyed operation wrote outside its transaction (the route and the fix are in the server's log). */
  writeOutsideTransaction: (policyUrl: string | undefined) =>
    new IdempotencyProblem(
      policyUrl,
      500,
      IdempotencyErrorCode.WriteOutsideTransaction,
      'Write Outside The Idempotency Transaction',
      'The server tried to write outside the transaction that stores this Idempotency-Key\'s response. Nothing was committed. This is an error in the server; the reason is in its log.',
    ),
};

/** Thrown by the fenced completion when the key is no longer ours: roll back. */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError';
  constructor() {
    super('the idempotency key was taken over by another attempt; the completion matched no row');
  }
}

/**
 * Thrown by a store's completion when the work stands but its response could
 * not be stored (a store whose units are not transactions, e.g. Redis): the
 * attempt answers the response unstored, since a retry would repeat the work.
 */
export class ResponseNotStoredError extends Error {
  override name = 'ResponseNotStoredError';
  constructor(cause: unknown) {
    super(`the response could not be stored after the work ran: ${(cause as Error).message}`, { cause });
  }
}
