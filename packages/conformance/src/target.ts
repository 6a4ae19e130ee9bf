import { randomInt } from 'node:crypto';

/** One HTTP header, as `Name: value` on the command line. */
export type Header = readonly [name: string, value: string];

/** What the kit sends to: one route of one server. */
export interface Target {
  baseUrl: string;
  route: string;
  method: string;
  /** JSON with `{{unique}}` placeholders: a fresh value per check makes each check's effects countable. */
  bodyTemplate: string;
  /** The credentials of up to two API clients (the second for the scope check); none for an open route. */
  clients: Header[];
}

/** One request as sent and its answer, with the times it was sent and answered (ms, monotonic). */
export interface Exchange {
  status: number;
  headers: Headers;
  body: string;
  sent: number;
  answered: number;
}

export interface SendOptions {
  body: string;
  /** The Idempotency-Key header's value as sent (quotes included); none to omit the header. */
  key?: string;
  /** Which client's credentials (0 or 1). */
  client?: number;
}

const PLACEHOLDER = /\{\{unique\}\}/g;

/** A fresh unique value: nine digits, so it fits a JSON string or an integer field (below 2^31). */
export const freshUnique = (): string => String(randomInt(100_000_000, 1_000_000_000));

/** The body for one unique value; refuses a template that is not JSON once filled in. */
export function renderBody(template: string, unique: string): string {
  const body = template.replace(PLACEHOLDER, unique);
  JSON.parse(body);
  return body;
}

export function hasPlaceholder(template: string): boolean {
  return template.includes('{{unique}}');
}

export function parseHeader(text: string): Header {
  const colon = text.indexOf(':');
  if (colon <= 0) throw new Error(`"${text}" is not a header: write it as "Name: value"`);
  return [text.slice(0, colon).trim(), text.slice(colon + 1).trim()];
}

export async function send(target: Target, options: SendOptions): Promise<Exchange> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const credentials = target.clients[options.client ?? 0];
  if (credentials) headers[credentials[0]] = credentials[1];
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  const sent = performance.now();
  const res = await fetch(new URL(target.route, target.baseUrl), {
    method: target.method,
    headers,
    body: options.body,
    signal: AbortSignal.timeout(30_000),
  });
  const body = await res.text();
  return { status: res.status, headers: res.headers, body, sent, answered: performance.now() };
}
