import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import request from 'supertest';
import { TestApp, countRows, createTestApp } from '../support/app';

/**
 * CARD_NETWORK_WEBHOOK_SECRET lists several secrets (a secret being rolled, several
 * endpoints delivering here): an event signed with any of them is received,
 * one signed with another secret is refused and nothing is recorded.
 */
const SECRET_OLD = 'whsec_rolled_out_0123456789abcdef';
const SECRET_NEW = 'whsec_rolled_in_0123456789abcdef';
const signer = new Stripe('sk_test_signer_only');

describe('webhooks verified with any of several secrets (e2e)', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ env: { CARD_NETWORK_WEBHOOK_SECRET: `${SECRET_OLD}, ${SECRET_NEW}` } });
  });
  afterAll(() => t?.close());

  /** An event the service receives and has nothing to do for. */
  const event = () => JSON.stringify({ id: `evt_${randomUUID().replace(/-/g, '')}`, object: 'event', type: 'customer.created', data: { object: { id: 'cus_1', object: 'customer', metadata: {} } } });
  const deliver = (payload: string, secret: string) =>
    request(t.app.getHttpServer())
      .post('/webhooks/card-network')
      .set('Content-Type', 'application/json')
      .set('Stripe-Signature', signer.webhooks.generateTestHeaderString({ payload, secret }))
      .send(payload);

  it.each([
    ['the first secret', SECRET_OLD],
    ['the second secret', SECRET_NEW],
  ])('receives an event signed with %s', async (_name, secret) => {
    const answer = await deliver(event(), secret).expect(200);
    expect(answer.body).toEqual({ received: true, effect: 'nothing_to_do' });
  });

  it('refuses an event signed with another secret: 400 invalid_webhook_signature, nothing recorded', async () => {
    const before = await countRows(t.dataSource, 'idempotency_messages');
    const refused = await deliver(event(), 'whsec_another_0123456789abcdef').expect(400);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.body.code).toBe('invalid_webhook_signature');
    expect(await countRows(t.dataSource, 'idempotency_messages')).toBe(before);
  });
});
