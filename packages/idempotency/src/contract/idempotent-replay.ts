import type { IdempotencyRequest } from './idempotency-request';

/**
 * How an HTTP route whose answer holds something that must never be stored
 * (a secret shown once, a one-time token) is kept and replayed:
 * `@Idempotent({ replay: TheProvider })`. The first request is answered with
 * the handler's value, as always; what is stored under the key (in the key's
 * transaction) is `store(value)`, as JSON; each replay is answered with
 * `replay(stored, request)` instead of the stored body, with the stored
 * status, Content-Type and Location, and `Idempotent-Replayed: true`. So the
 * app keeps the secret where it keeps it anyway (sealed in its own table),
 * and the keys table, the replay cache and any copy of them never hold it.
 *
 * `replay` rebuilds what the first request answered from what `store` kept
 * and the app's own records (the request's principal scopes them); an error
 * it throws is the replay's answer, through the app's exception filters.
 * Business outcomes (IdempotentOutcome, status 400 and above) are stored and
 * replayed as they are, through neither method.
 *
 * The class is a provider of the app (any module's `providers`), found when
 * the app starts. It needs no `implements`: `@Idempotent({ replay })` checks
 * its shape.
 */
export interface IdempotentReplay<Answer = unknown, Stored = unknown> {
  /** What is stored under the key in place of the handler's value `answer` (serialised as JSON). */
  store(answer: Answer): Stored;
  /** The answer of a replay, from what `store` kept (parsed back from JSON). */
  replay(stored: Stored, request: IdempotencyRequest): Promise<Answer>;
}
