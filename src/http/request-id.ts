import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { hasLuhnWindow } from '../card-numbers/card-number';

const ACCEPTABLE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A request id per request: an incoming X-Request-Id is honoured when it is a
 * short, plain token (anything else could inject into logs) holding nothing
 * redactCardNumbers would redact, otherwise a UUID. It is echoed back and
 * attached to every log line of the request.
 */
export function newRequestId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  return typeof incoming === 'string' && ACCEPTABLE.test(incoming) && !hasLuhnWindow(incoming) ? incoming : randomUUID();
}

