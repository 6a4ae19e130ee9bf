/**
 * GET /v1/events (`?type=`, exact or a prefix with `*`) and GET /v1/events/:id:
 * what the network recorded, newest first. Network.emit records them.
 */
import { noSuch } from './api';
import { Call, Route } from './call';
import { paginate, parseParams } from './params';
import { sendJson } from './reply';

function list(call: Call): void {
  const params = parseParams(call.query, ['limit', 'starting_after', 'type'], false);
  const type = params.values.get('type');
  // Stripe's filter: an exact type, or a prefix with `*` (`payment_intent.*`).
  const matches = (t: string) => type === undefined || (type.endsWith('*') ? t.startsWith(type.slice(0, -1)) : t === type);
  const newestFirst = [...call.account.events.values()].reverse().filter((e) => matches(e.type));
  sendJson(call.res, 200, paginate(newestFirst, params, '/v1/events', 'event'));
}

function retrieve(call: Call, match: RegExpExecArray): void {
  parseParams(call.query, [], false);
  const id = decodeURIComponent(match[1]);
  const found = call.account.events.get(id);
  if (!found) throw noSuch('event', id, 'id', 404);
  sendJson(call.res, 200, found);
}

export const EVENT_ROUTES: readonly Route[] = [
  { pattern: /^\/v1\/events$/, handlers: { GET: list } },
  { pattern: /^\/v1\/events\/([^/]+)$/, handlers: { GET: retrieve } },
];
