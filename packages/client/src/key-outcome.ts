/**
 * Where an operation stands, asked by its key (`GET /idempotency-keys/{key}`),
 * without running it: by the caller (`outcome()`), or once after a POST gave up.
 */
import type { KeyOutcome } from './api-types';
import { attemptOnce } from './attempt';
import type { ClientSettings } from './client-options';
import { prepareGet } from './prepared-request';

/** The path that answers where the operation sent with `key` stands. */
export function keyOutcomePath(key: string): string {
  return `/idempotency-keys/${encodeURIComponent(key)}`;
}

/**
 * One attempt at the outcome after giving up: a server that did not answer the
 * POST is not waited for again. Undefined when it does not answer 200 with JSON.
 */
export async function lookUpOutcome(settings: ClientSettings, key: string): Promise<KeyOutcome | undefined> {
  const answer = await attemptOnce(settings, prepareGet(settings, keyOutcomePath(key)), undefined);
  if (answer.kind !== 'response' || answer.status !== 200) return undefined;
  try {
    return JSON.parse(answer.text) as KeyOutcome;
  } catch {
    return undefined;
  }
}
