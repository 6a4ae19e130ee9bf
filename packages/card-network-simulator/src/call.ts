/**
 * A request as the routes see it, and the shape of a route: a path pattern
 * and a handler per method it allows (any other method is a 405 naming them).
 */
import type { IncomingMessage } from 'node:http';
import type { Account, PendingPost } from './account';
import type { Network } from './network';

/** What acceptPost needs of the request that carries a POST. */
export interface PostRequest {
  net: Network;
  account: Account;
  req: IncomingMessage;
  res: PendingPost['res'];
  path: string;
  arrivedAt: number;
  requestId: string;
}

/** One request to the API, its body read in full, with the account its key opened. */
export interface Call extends PostRequest {
  method: string;
  /** The URL's query: a GET's parameters. */
  query: URLSearchParams;
  /** The body as sent: a POST's form, or a control endpoint's JSON. */
  raw: string;
}

export type Handler = (call: Call, match: RegExpExecArray) => void;

export interface Route {
  pattern: RegExp;
  /** In the order the 405's Allow lists them. */
  handlers: Partial<Record<'GET' | 'POST', Handler>>;
}

/** A POST's parameters, form-encoded as Stripe takes them. */
export const form = (call: Call): URLSearchParams => new URLSearchParams(call.raw);
