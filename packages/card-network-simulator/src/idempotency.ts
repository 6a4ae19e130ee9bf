/**
 * Every POST to /v1/* goes through here: Stripe's Idempotency-Key rules, the
 * hold, the effect on arrival and the answer `delayMs` after it, or lost.
 *
 * The effect happens the moment the request is executed and the answer goes
 * out later, so a caller that gives up in between leaves "card charged, answer
 * lost". The result is saved under the key: a retry with the same key and
 * parameters replays it, other parameters get 400 idempotency_error, and a
 * retry while the first is still in flight 409 idempotency_key_in_use. Results
 * that leave no trace (validation errors) free the key again.
 */
import { createHmac } from 'node:crypto';
import type { Account, Cause, Outcome, PendingPost } from './account';
import { ApiError, invalid } from './api';
import type { PostRequest } from './call';
import { isLostAnswer, takeFault } from './faults';
import type { Network } from './network';
import { fingerprint, ParsedParams } from './params';
import { INTERNAL_ERROR, loseAnswer, retryAdvice, send, sendError, sendJson } from './reply';

const MAX_KEY_LENGTH = 255;

/** Validates a POST to /v1/* on arrival, then executes it now or holds it. */
export function acceptPost(post: PostRequest, params: ParsedParams, prepare: (cause: Cause) => () => Outcome): void {
  const { account, req, res, path, requestId } = post;
  const header = req.headers['idempotency-key'];
  const key = Array.isArray(header) ? header.join(', ') : header;
  if (key !== undefined && (key.length === 0 || key.length > MAX_KEY_LENGTH)) {
    throw invalid(`Invalid Idempotency-Key: it must be 1 to ${MAX_KEY_LENGTH} characters long.`, 'idempotency_key_invalid');
  }
  const pending: PendingPost = { res, requestId, path, params, key, prepare };
  if (account.holding) {
    account.held.add(pending);
    res.once('close', () => account.held.delete(pending));
    return;
  }
  executePost(post.net, account, pending, post.arrivedAt);
}

/** Idempotency, execution on arrival, and the delayed (or lost) answer of one POST /v1/*. */
export function executePost(net: Network, account: Account, pending: PendingPost, arrivedAt: number): void {
  const { res, path, params, key, requestId } = pending;
  const keyHeaders: Record<string, string> = key === undefined ? {} : { 'Idempotency-Key': key };
  const print = key === undefined ? '' : createHmac('sha256', net.fingerprintKey).update(fingerprint('POST', path, params)).digest('base64');
  if (key !== undefined && answeredUnderKey(account, pending, key, print, keyHeaders)) return;

  let effect: () => Outcome;
  try {
    effect = pending.prepare({ account, request: { id: requestId, idempotency_key: key ?? null } });
  } catch (e) {
    if (e instanceof ApiError) return sendError(res, e, keyHeaders);
    throw e;
  }
  // A saved 500 stands in for the effect: nothing happens, and that answer is the one kept.
  const savedError = key !== undefined && takeFault(account.faults, (f) => f === 'saved_error') !== undefined;
  const outcome: Outcome = savedError ? { status: 500, body: INTERNAL_ERROR, save: true } : effect();
  let fault = outcome.fault;
  if (outcome.save && fault === undefined && !savedError) fault = takeFault(account.faults, isLostAnswer);
  if (key !== undefined) account.keys.set(key, { state: 'in_flight', fingerprint: print });
  // Serialized now: the answer tells the state at effect time, even if the intent moves on during the delay.
  const body = JSON.stringify(outcome.body);

  net.later(Math.max(0, arrivedAt + net.settings.delayMs - performance.now()), () => {
    if (key !== undefined) {
      if (outcome.save) {
        account.keys.set(key, { state: 'done', fingerprint: print, status: outcome.status, body, requestId, expiresAt: performance.now() + net.settings.ttlMs });
      } else {
        account.keys.delete(key);
      }
    }
    if (fault) return loseAnswer(res, fault, keyHeaders);
    send(res, outcome.status, body, { ...keyHeaders, ...retryAdvice(outcome) });
  });
}

/**
 * What the key already decides: 409 while its first request is in flight, and
 * within the key window a 400 for other parameters or the saved answer again
 * (which a queued fault loses too: a network loses answers, not effects).
 * False when the request is the key's to execute.
 */
function answeredUnderKey(account: Account, pending: PendingPost, key: string, print: string, keyHeaders: Record<string, string>): boolean {
  const { res } = pending;
  const entry = account.keys.get(key);
  if (entry?.state === 'in_flight') {
    sendJson(res, 409, { error: { type: 'idempotency_error', code: 'idempotency_key_in_use', message: inUse(key) } }, keyHeaders);
    return true;
  }
  if (entry?.state !== 'done' || entry.expiresAt <= performance.now()) return false;
  if (entry.fingerprint !== print) {
    sendJson(res, 400, { error: { type: 'idempotency_error', message: otherParameters(key) } }, keyHeaders);
    return true;
  }
  const lost = takeFault(account.faults, isLostAnswer);
  if (lost) loseAnswer(res, lost, keyHeaders);
  else send(res, entry.status, entry.body, { ...keyHeaders, 'Idempotent-Replayed': 'true', 'Original-Request': entry.requestId });
  return true;
}

const inUse = (key: string): string =>
  `There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): ${key}. Please try again later.`;

const otherParameters = (key: string): string =>
  `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`;
