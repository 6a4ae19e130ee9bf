/**
 * The control API, /_simulator/*: fault injection and inspection, per account
 * (the same Bearer auth as the API acts on that key's account only). Bodies
 * are JSON (an object) or a form; every answer is 200 with the account's stats.
 *
 *   POST   /_simulator/faults   {"fault": "drop" | "hang" | "error", "times": n}
 *          The next n POSTs to /v1/* that execute and save a result (or replay
 *          one; not validation errors) are executed and saved normally, then
 *          their answer is lost: `drop` destroys the socket, `hang` never
 *          answers (the socket stays open until the client gives up or close()),
 *          `error` answers 500 api_error without a `code`.
 *   POST   /_simulator/faults   {"fault": "saved_error", "times": n}
 *          The next n POSTs to /v1/* with an Idempotency-Key that would execute
 *          (not replays, not validation errors) are NOT executed (no effect, no
 *          event): a 500 api_error is saved under the key instead, as Stripe saves
 *          a 500 of a request it began, and every retry with that key and the same
 *          parameters replays it (Idempotent-Replayed: true) until the key window
 *          (idempotencyTtlMs) ends; after it the key is free and the request runs.
 *   POST   /_simulator/refusals {"status": 400 | 401 | 429, "times": n, "after": k, "param": p}
 *          The next n requests to /v1/* (any method), after k that pass, are
 *          refused before anything is done: 400 invalid_request_error, 401 (a
 *          rotated key), 429 (a rate limit), with Stripe-Should-Retry: false.
 *          A 400 with `param` names that parameter, as Stripe's refusal of a
 *          value does (`amount`, `currency`). Such an answer speaks only for its
 *          own request.
 *   DELETE /_simulator/faults   clears the pending faults and refusals.
 *   POST   /_simulator/hold     incoming POSTs to /v1/* are accepted but not
 *          executed. A held request whose client disconnects is discarded
 *          without effect ("the request never reached the network").
 *   POST   /_simulator/release  executes the still-connected held requests in
 *          arrival order (their delay counts from the release) and stops holding.
 *   POST   /_simulator/webhook-faults {"fault": "duplicate" | "out_of_order" | "late", "times": n, ...},
 *   DELETE /_simulator/webhook-faults,
 *   POST   /_simulator/webhooks/pause, /_simulator/webhooks/resume: see webhooks.ts.
 *   GET    /_simulator/stats    held requests, pending faults, webhook counts.
 */
import type { Account } from './account';
import { invalid } from './api';
import type { Call } from './call';
import { FAULTS, RefusalStatus, REFUSALS } from './faults';
import { executePost } from './idempotency';
import { sendJson } from './reply';
import { PendingWebhookFault, WEBHOOK_FAULTS } from './webhooks';

/** A control endpoint's body: JSON (an object) or a form. */
function controlInput(call: Call): Record<string, unknown> {
  if (!(call.req.headers['content-type'] ?? '').includes('json')) return Object.fromEntries(new URLSearchParams(call.raw));
  try {
    const parsed: unknown = JSON.parse(call.raw || '{}');
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as Record<string, unknown>;
  } catch {
    throw invalid('Invalid JSON body.', 'parameter_invalid_json');
  }
}

function controlChoice<T extends string>(input: Record<string, unknown>, name: string, choices: readonly T[]): T {
  const value = input[name];
  if (typeof value !== 'string' || !choices.includes(value as T)) {
    throw invalid(`${name} must be one of ${choices.join(', ')}`, 'parameter_invalid', name);
  }
  return value as T;
}

function controlInteger(input: Record<string, unknown>, name: string, fallback: number, min: number, max: number): number {
  const value = input[name] === undefined ? fallback : Number(input[name]);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(`${name} must be an integer from ${min} to ${max}`, 'parameter_invalid_integer', name);
  }
  return value;
}

function stats(account: Account) {
  return {
    held: account.held.size,
    holding: account.holding,
    pending_faults: account.faults.length,
    webhooks: account.webhooks.stats(),
  };
}

function addFaults(call: Call): object {
  const input = controlInput(call);
  const fault = controlChoice(input, 'fault', FAULTS);
  const times = controlInteger(input, 'times', 1, 1, 10_000);
  for (let i = 0; i < times; i++) call.account.faults.push(fault);
  return { pending: call.account.faults, ...stats(call.account) };
}

function addRefusals(call: Call): object {
  const input = controlInput(call);
  const status = Number(input.status);
  if (!(status in REFUSALS)) throw invalid('status must be one of 400, 401, 429', 'parameter_invalid', 'status');
  const times = controlInteger(input, 'times', 1, 1, 10_000);
  const after = controlInteger(input, 'after', 0, 0, 10_000);
  const param = input.param === undefined ? undefined : String(input.param);
  if (param !== undefined && (status !== 400 || !/^[a-z_[\]]{1,64}$/.test(param))) {
    throw invalid('param is for a 400 only: a parameter name (letters, _ and [])', 'parameter_invalid', 'param');
  }
  for (let i = 0; i < times; i++) call.account.refusals.push({ status: status as RefusalStatus, skip: i === 0 ? after : 0, param });
  return { refusals: call.account.refusals.length, ...stats(call.account) };
}

function clearFaults({ account }: Call): object {
  account.faults = [];
  account.refusals = [];
  return { pending: account.faults, ...stats(account) };
}

function hold({ account }: Call): object {
  account.holding = true;
  return stats(account);
}

function release({ net, account }: Call): object {
  account.holding = false;
  const held = [...account.held];
  account.held.clear();
  const now = performance.now();
  for (const pending of held) executePost(net, account, pending, now);
  return { released: held.length, ...stats(account) };
}

function addWebhookFaults(call: Call): object {
  const input = controlInput(call);
  const fault = controlChoice(input, 'fault', WEBHOOK_FAULTS);
  const times = controlInteger(input, 'times', 1, 1, 10_000);
  let pending: PendingWebhookFault;
  switch (fault) {
    case 'duplicate':
      pending = { fault: 'duplicate', copies: controlInteger(input, 'copies', 2, 1, 100) };
      break;
    case 'late':
      pending = { fault: 'late', delayMs: controlInteger(input, 'delay_ms', 5_000, 0, 3_600_000) };
      break;
    case 'out_of_order':
      pending = { fault: 'out_of_order' };
      break;
  }
  call.net.webhooks.addFault(call.account.webhooks, pending, times);
  return stats(call.account);
}

const CONTROLS: Readonly<Record<string, (call: Call) => object>> = {
  'POST /_simulator/faults': addFaults,
  'POST /_simulator/refusals': addRefusals,
  'DELETE /_simulator/faults': clearFaults,
  'POST /_simulator/hold': hold,
  'POST /_simulator/release': release,
  'POST /_simulator/webhook-faults': addWebhookFaults,
  'DELETE /_simulator/webhook-faults': ({ net, account }) => (net.webhooks.clearFaults(account.webhooks), stats(account)),
  'POST /_simulator/webhooks/pause': ({ net, account }) => (net.webhooks.pause(account.webhooks), stats(account)),
  'POST /_simulator/webhooks/resume': ({ net, account }) => ({ resumed: net.webhooks.resume(account.webhooks), ...stats(account) }),
  'GET /_simulator/stats': ({ account }) => stats(account),
};

/** A request to /_simulator/*: false when no control endpoint has that method and path. */
export function control(call: Call): boolean {
  const route = `${call.req.method ?? 'GET'} ${call.path}`;
  if (!Object.hasOwn(CONTROLS, route)) return false;
  sendJson(call.res, 200, CONTROLS[route](call));
  return true;
}
