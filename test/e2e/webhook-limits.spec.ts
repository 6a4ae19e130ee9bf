import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import Stripe from 'stripe';
import request from 'supertest';
import { DEFAULT_WEBHOOK_SECRET } from '../../src/config/config';
import { CLIENT_A, TestApp, createTestApp, failedAuthLimit } from '../support/app';

const WEBHOOK_PATH = '/webhooks/card-network';
const WEBHOOK_BODY_LIMIT = 64 * 1024;
const signer = new Stripe('sk_test_signer_only');
const sign = (payload: string, secret = DEFAULT_WEBHOOK_SECRET) => signer.webhooks.generateTestHeaderString({ payload, secret });
const FORGED_SECRET = 'whsec_forged_0123456789abcdef';

/** An event that settles nothing (200 nothing_to_do), padded with spaces to `size` bytes when asked. */
function event(size?: number): string {
  const payload = JSON.stringify({ id: `evt_${randomUUID().replace(/-/g, '')}`, object: 'event', type: 'customer.created', data: { object: { object: 'customer', id: 'cus_1' } } });
  return size === undefined ? payload : payload.padEnd(size, ' ');
}

/** Sends raw HTTP and resolves with what came back once the server closes the connection. */
function rawExchange(port: number, head: string, body: Buffer): Promise<{ answer: string }> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(head);
      socket.write(body);
    });
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('close', () => resolve({ answer }));
    socket.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' || error.code === 'EPIPE' ? undefined : reject(error)));
  });
}

/**
 * The card network's webhooks are authenticated by their signature alone:
 * verified on the raw bytes before anything parses them, held to 64 KiB, with
 * a budget of invalid signatures per address of their own that never stops a
 * delivery that verifies. Requests come through a trusted proxy (127.0.0.1),
 * from the address each test names.
 */
describe('webhook deliveries (e2e)', () => {
  let t: TestApp;
  const deliver = (address: string, payload: string, signature?: string) => {
    const req = request(t.url!).post(WEBHOOK_PATH).set('X-Forwarded-For', address).set('Content-Type', 'application/json');
    return (signature === undefined ? req : req.set('Stripe-Signature', signature)).send(payload);
  };
  beforeAll(async () => {
    t = await createTestApp({ env: { HTTP_TRUST_PROXY: '127.0.0.1' }, config: failedAuthLimit(5), listen: true });
  });
  afterAll(() => t.close());

  it('are verified on the raw bytes before any parsing: a malformed, too deep or __proto__ body is refused for its signature', async () => {
    for (const payload of ['{"not json', `${'['.repeat(40)}${']'.repeat(40)}`, '{"__proto__":{"polluted":true}}']) {
      const refused = await deliver('198.51.100.1', payload, sign(payload, FORGED_SECRET)).expect(400);
      expect(refused.body.code).toBe('invalid_webhook_signature');
    }
  });

  it('have a budget of invalid signatures per address of their own: past it 429 on the webhook only, and a valid delivery from that address still passes', async () => {
    const attacker = '198.51.100.2';
    for (let i = 0; i < 5; i++) {
      const payload = event();
      await deliver(attacker, payload, sign(payload, FORGED_SECRET)).expect(400);
    }
    // Over the budget: a forgery is read, does not verify, and is refused 429.
    const forged = event();
    const refused = await deliver(attacker, forged, sign(forged, FORGED_SECRET)).expect(429);
    expect(refused.body).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // No well-formed signature at all: refused before the body is read, the connection closed.
    const unsigned = await deliver(attacker, event()).expect(429);
    expect(unsigned.headers.connection).toBe('close');
    // The network's own deliveries come from that same address: a valid one passes.
    const valid = event();
    expect((await deliver(attacker, valid, sign(valid)).expect(200)).body).toEqual({ received: true, effect: 'nothing_to_do' });
    // Other routes do not notice: the failed-auth budget of the address is untouched.
    await request(t.url!).get('/orders').set('X-Forwarded-For', attacker).expect(401);
    await request(t.url!).get('/orders').set('X-Forwarded-For', attacker).set(t.auth(CLIENT_A)).expect(200);
    // Another address has its own budget.
    const other = event();
    await deliver('198.51.100.3', other, sign(other, FORGED_SECRET)).expect(400);
  });

  it('are held to 64 KiB: past it 413 problem+json, the rest of the body not read', async () => {
    const address = '198.51.100.4';
    const largest = event(WEBHOOK_BODY_LIMIT);
    await deliver(address, largest, sign(largest)).expect(200);

    const over = event(WEBHOOK_BODY_LIMIT + 1);
    const tooLarge = await deliver(address, over, sign(over)).expect(413);
    expect(tooLarge.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(tooLarge.body).toMatchObject({ status: 413, code: 'payload_too_large' });
    expect(tooLarge.headers.connection).toBe('close');

    // 10 MB announced, 100 KB sent: answered 413 and closed without the rest, which never
    // comes (a server that waited for it would end the request with 408 at its timeout).
    const port = Number(new URL(t.url!).port);
    const announced = await rawExchange(
      port,
      `POST ${WEBHOOK_PATH} HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: ${address}\r\nContent-Type: application/json\r\nContent-Length: ${10 * 1024 * 1024}\r\n\r\n`,
      Buffer.alloc(100_000, 0x20),
    );
    expect(announced.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(announced.answer).toMatch(/\r\nconnection: close\r\n/i);

    // A chunked body with no length: read up to the limit, then 413 and closed.
    const chunk = ' '.repeat(10_000);
    const chunked = await rawExchange(
      port,
      `POST ${WEBHOOK_PATH} HTTP/1.1\r\nHost: localhost\r\nX-Forwarded-For: ${address}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      Buffer.from(Array.from({ length: 10 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('')),
    );
    expect(chunked.answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(chunked.answer).toMatch(/\r\nconnection: close\r\n/i);
  });
});
