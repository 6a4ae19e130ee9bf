/*
 * The key readers of GraphQL fields and message handlers, given each server's and
 * transport's context as it is: Apollo's (`req`) and Mercurius's (`req`, or
 * `reply.request`), NATS's, Kafka's and RabbitMQ's message headers, TCP's none.
 * Only Mercurius and TCP run in these tests (no Apollo driver, no Kafka or
 * RabbitMQ broker), so the readers are given those contexts directly. What the
 * module answers outside HTTP (its problems, a replayed outcome, another error)
 * is tested through a resolver and a message handler (test/contexts).
 */
import { graphqlHttpRequest, readGraphqlKey } from '../../src/contexts/graphql-context';
import { TransportContext, readMessageKey } from '../../src/contexts/message-context';

const request = (headers: Record<string, string | string[]>) => ({ method: 'POST', url: '/graphql', headers });

describe('where a GraphQL field finds its key', () => {
  it('reads the header of the HTTP request (any case of the name), an argument, or a function', () => {
    const req = request({ 'idempotency-key': 'k-1' });
    expect(readGraphqlKey({ header: 'Idempotency-Key' }, {}, { req }, req)).toBe('k-1');
    expect(readGraphqlKey({ arg: 'idempotencyKey' }, { idempotencyKey: 'k-2' }, undefined, undefined)).toBe('k-2');
    expect(readGraphqlKey({ arg: 'idempotencyKey' }, { idempotencyKey: null }, undefined, undefined)).toBeUndefined();
    expect(readGraphqlKey((args) => `order-${(args as { n: number }).n}`, { n: 7 }, undefined, undefined)).toBe('order-7');
  });

  it('refuses a payload field, which names a message key', () => {
    expect(() => readGraphqlKey({ field: 'id' }, {}, undefined, undefined)).toThrow(/use \{ arg \} or \{ header \}/);
  });

  it('finds the HTTP request in Apollo\'s context (req) and in Mercurius\'s (req, or reply.request)', () => {
    const req = request({});
    expect(graphqlHttpRequest({ req })).toBe(req);
    expect(graphqlHttpRequest({ reply: { request: req } })).toBe(req);
    expect(graphqlHttpRequest(undefined)).toBeUndefined();
  });
});

describe('where a message finds its key', () => {
  it('reads a payload field (a string or a number), else none', () => {
    expect(readMessageKey({ field: 'id' }, { id: 'evt_1' }, undefined)).toBe('evt_1');
    expect(readMessageKey({ field: 'id' }, { id: 42 }, undefined)).toBe('42');
    expect(readMessageKey({ field: 'id' }, { id: { nested: true } }, undefined)).toBeUndefined();
    expect(readMessageKey({ field: 'id' }, 'a string payload', undefined)).toBeUndefined();
  });

  it('reads a header of NATS (getHeaders().get), Kafka (message headers, Buffers) and RabbitMQ (properties.headers); TCP has none', () => {
    const nats = { getHeaders: () => ({ get: (name: string) => (name === 'message-id' ? 'n-1' : '') }) };
    const kafka = { getMessage: () => ({ headers: { 'message-id': Buffer.from('k-1') } }) };
    const rabbit = { getMessage: () => ({ properties: { headers: { 'message-id': 'r-1' } } }) };
    // A TCP context has neither getHeaders() nor getMessage().
    const tcp: TransportContext & { getPattern(): string } = { getPattern: () => 'ledger.credit' };
    expect(readMessageKey({ header: 'message-id' }, {}, nats)).toBe('n-1');
    expect(readMessageKey({ header: 'message-id' }, {}, kafka)).toBe('k-1');
    expect(readMessageKey({ header: 'message-id' }, {}, rabbit)).toBe('r-1');
    expect(readMessageKey({ header: 'message-id' }, {}, tcp)).toBeUndefined();
  });

  it('asks a function, and refuses a GraphQL argument', () => {
    expect(readMessageKey((data) => (data as { ref: string }).ref, { ref: 'x' }, undefined)).toBe('x');
    expect(() => readMessageKey({ arg: 'id' }, {}, undefined)).toThrow(/use \{ field \} or \{ header \}/);
  });
});
