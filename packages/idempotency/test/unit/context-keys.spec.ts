/*
 * Where a GraphQL field and a message find what they are keyed by, in the
 * context of each server and transport as it is: Apollo's (`req`) and
 * Mercurius's (`req`, or `reply.request`); the message headers of NATS, Kafka
 * and RabbitMQ, and TCP's none. Only Mercurius and TCP run in these tests (no
 * Apollo driver, no Kafka or RabbitMQ broker), so these readers are given those
 * contexts directly. The key sources (header, argument, field, function) and
 * what the module answers outside HTTP are tested through a resolver and a
 * message handler (test/contexts).
 */
import { graphqlHttpRequest } from '../../src/contexts/graphql-context';
import { TransportContext, readMessageKey } from '../../src/contexts/message-context';

const request = (headers: Record<string, string | string[]>) => ({ method: 'POST', url: '/graphql', headers });

describe('where a GraphQL field finds its key', () => {
  it('finds the HTTP request in Apollo\'s context (req) and in Mercurius\'s (req, or reply.request)', () => {
    const req = request({});
    expect(graphqlHttpRequest({ req })).toBe(req);
    expect(graphqlHttpRequest({ reply: { request: req } })).toBe(req);
    expect(graphqlHttpRequest(undefined)).toBeUndefined();
  });
});

describe('where a message finds its key', () => {
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
});
