/**
 * From a request to its handler: the account its key opens, then the control
 * API (/_simulator/*), a queued refusal (/v1/* only), and the resource whose
 * path it names: 405 with Allow for a method that path does not take, 404 for
 * no path at all.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Account } from './account';
import { ApiError, invalid } from './api';
import type { Call, Route } from './call';
import { control } from './control';
import { EVENT_ROUTES } from './events';
import { dueRefusal } from './faults';
import type { Network } from './network';
import { PAYMENT_INTENT_ROUTES } from './payment-intents';
import { REFUND_ROUTES } from './refunds';
import { sendJson } from './reply';
import { TOKEN_ROUTES } from './tokens';

const ROUTES: readonly Route[] = [...PAYMENT_INTENT_ROUTES, ...TOKEN_ROUTES, ...REFUND_ROUTES, ...EVENT_ROUTES];

/** `sk_test_****cdef`: enough to recognise a key in a log, never enough to use it. */
export function maskSecret(secret: string): string {
  const prefix = /^(sk|rk|pk)_(test|live)_/.exec(secret)?.[0] ?? '';
  const rest = secret.slice(prefix.length);
  return `${prefix}****${rest.length > 8 ? rest.slice(-4) : ''}`;
}

/** The account of the secret key sent as Bearer, or as HTTP Basic's username. */
function authenticate(net: Network, req: IncomingMessage): Account {
  const header = req.headers.authorization ?? '';
  let secret: string | undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const basic = /^Basic\s+(\S+)\s*$/i.exec(header);
  if (bearer) secret = bearer[1];
  else if (basic) secret = Buffer.from(basic[1], 'base64').toString('utf8').split(':')[0];
  if (!secret) {
    throw invalid(
      "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
      undefined,
      undefined,
      401,
    );
  }
  const account = net.accounts.get(secret);
  if (!account) throw invalid(`Invalid API Key provided: ${maskSecret(secret)}`, undefined, undefined, 401);
  return account;
}

function notFound(req: IncomingMessage, path: string): ApiError {
  return invalid(`Unrecognized request URL (${req.method}: ${path}).`, undefined, undefined, 404);
}

/** Answers one request whose body has arrived; an ApiError thrown here is the answer. */
export function route(net: Network, req: IncomingMessage, res: ServerResponse, raw: string, arrivedAt: number, requestId: string): void {
  const account = authenticate(net, req);
  const url = new URL(req.url ?? '/', 'http://simulator.invalid');
  const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : url.pathname;
  const call: Call = { net, account, req, res, path, arrivedAt, requestId, method: req.method ?? 'GET', query: url.searchParams, raw };
  if (path.startsWith('/_simulator/')) {
    if (control(call)) return;
    throw notFound(req, path);
  }
  const refusal = dueRefusal(account.refusals, path);
  // An answer a retry cannot change: the SDK does not resend it.
  if (refusal) return sendJson(res, refusal.status, { error: refusal.error }, { 'Stripe-Should-Retry': 'false' });
  for (const { pattern, handlers } of ROUTES) {
    const match = pattern.exec(path);
    if (!match) continue;
    const handler = Object.hasOwn(handlers, call.method) ? handlers[call.method as keyof typeof handlers] : undefined;
    if (handler) return handler(call, match);
    res.setHeader('Allow', Object.keys(handlers).join(', '));
    throw invalid(`Method ${call.method} is not allowed on ${path}.`, undefined, undefined, 405);
  }
  throw notFound(req, path);
}
