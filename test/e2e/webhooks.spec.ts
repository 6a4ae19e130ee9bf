import { randomUUID } from 'node:crypto';
import { Server, createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import Stripe from 'stripe';
import request from 'supertest';
import { DEFAULT_WEBHOOK_SECRET } from '../../src/config/config';
import { TestApp, countRows, createTestApp } from '../support/app';
import { CardNetworkProcess, Ledger, NetworkEvent, startCardNetworkProcess, networkAppEnv } from '../support/card-network';
import { paymentBody, createPayment } from '../support/fixtures';
import { waitFor } from '../support/http-client';
import { keyIs } from '../support/keys';

/**
 * The card network's webhooks, consumed once per event id in the same
 * transaction as their effect. The network is a process of its own that
 * delivers its events (signed, retried until a 2xx) to the app through a small
 * relay (the app's port is known only once it listens). Recovery is off: what
 * settles a payment nobody retries is the webhook.
 */
jest.setTimeout(120_000);

const WEBHOOK_PATH = '/webhooks/card-network';
const signer = new Stripe('sk_test_signer_only');

function sign(payload: string, secret = DEFAULT_WEBHOOK_SECRET, timestamp = Math.floor(Date.now() / 1000)): string {
  return signer.webhooks.generateTestHeaderString({ payload, secret, timestamp });
}

describe('card network webhooks (e2e)', () => {
  let network: CardNetworkProcess;
  let ledger: Ledger;
  let relay: Server;
  let appUrl: string | undefined;
  let t: TestApp;
  const http = () => request(t.app.getHttpServer());
  const pay = (key: string, body: object) => http().post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body);
  const deliver = (payload: string, signature?: string) => {
    const req = http().post(WEBHOOK_PATH).set('Content-Type', 'application/json');
    return (signature === undefined ? req : req.set('Stripe-Signature', signature)).send(payload);
  };
  const payment = async (id: string) =>
    (await t.dataSource.query<{ status: string }[]>('SELECT status FROM payments WHERE id = $1', [id]))[0]?.status;
  const processedEvents = (id: string) => countRows(t.dataSource, 'idempotency_messages', 'source = $1 AND message_id = $2', ['card-network', id]);

  beforeAll(async () => {
    // Forwards the network's deliveries to the app once it listens (503 before: the network retries).
    relay = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (!appUrl) return void res.writeHead(503).end();
        fetch(`${appUrl}${req.url}`, { method: 'POST', headers: req.headers as Record<string, string>, body: Buffer.concat(chunks) }).then(
          async (answer) => res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(await answer.text()),
          () => res.writeHead(502).end(),
        );
      });
    });
    await new Promise<void>((listening) => relay.listen(0, '127.0.0.1', listening));
    const { port } = relay.address() as AddressInfo;
    network = await startCardNetworkProcess({
      env: { CARD_NETWORK_WEBHOOK_URL: `http://127.0.0.1:${port}${WEBHOOK_PATH}`, CARD_NETWORK_WEBHOOK_SECRET: DEFAULT_WEBHOOK_SECRET },
    });
    ledger = network.ledger;
    t = await createTestApp({
      listen: true,
      env: networkAppEnv(network),
    });
    appUrl = t.url;
  });
  afterAll(async () => {
    await t?.close();
    await network?.stop();
    await new Promise((closed) => relay?.close(closed));
  });

  it('a payment whose answer is lost and whose client never retries is settled by the webhook; a late retry replays it', async () => {
    const key = randomUUID();
    const body = paymentBody({ source: 'tok_chargeThenHang', description: `webhook settles ${key}` });
    const unknown = await pay(key, body).expect(503);
    expect(unknown.body.code).toBe('card_network_unavailable');
    const [row] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE description = $1', [body.description]);

    // The first delivery met the request still holding the key (409); the network's retry settles it.
    await waitFor('the webhook to settle the payment', async () => (await payment(row.id)) === 'succeeded', { timeoutMs: 20_000, intervalMs: 100 });
    const [stored] = await t.dataSource.query<{ status: number }[]>(`SELECT status FROM idempotency_keys WHERE ${keyIs()}`, [key]);
    expect(stored.status).toBe(201);

    const late = await pay(key, body).expect(201);
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.body).toMatchObject({ id: row.id, status: 'succeeded' });
    expect(late.headers.location).toBe(`/payments/${row.id}`);
    const charges = await ledger.chargesDescribed(body.description);
    expect(charges.map((c) => c.metadata.payment_id)).toEqual([row.id]);
    // Its event, written once, by the webhook that settled it.
    const events = await t.dataSource.query<{ type: string }[]>(`SELECT type FROM events WHERE data->>'id' = $1`, [row.id]);
    expect(events.map((e) => e.type)).toEqual(['payment.succeeded']);
  });

  it('a refund whose answer is lost is settled by its refund.created event', async () => {
    const paid = await createPayment(t, paymentBody({ amount: 800, description: `webhook refund ${randomUUID()}` }));
    await ledger.fault('hang', 1);
    await http().post(`/payments/${paid.id}/refunds`).set(t.auth()).set('Idempotency-Key', randomUUID()).send({ amount: 300 }).expect(503);
    await waitFor(
      'the webhook to settle the refund',
      async () => {
        const got = await http().get(`/payments/${paid.id}`).set(t.auth()).expect(200);
        return got.body.refunds[0]?.status === 'succeeded';
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
  });

  describe('deliveries the app must not believe, repeat or apply backwards', () => {
    let event: NetworkEvent;
    let paymentId: string;
    let key: string;

    beforeAll(async () => {
      // Events are kept at the network: this suite delivers them itself.
      await ledger.pauseWebhooks();
      key = randomUUID();
      const body = paymentBody({ source: 'tok_chargeThenHang', description: `webhook drills ${key}` });
      await pay(key, body).expect(503);
      [{ id: paymentId }] = await t.dataSource.query<{ id: string }[]>('SELECT id FROM payments WHERE description = $1', [body.description]);
      [event] = (await ledger.events('payment_intent.succeeded')).filter((e) => e.data.object.metadata.payment_id === paymentId);
      expect(event).toBeDefined();
    });

    it.each([
      ['no signature', () => undefined],
      ['a forged signature (another secret)', (payload: string) => sign(payload, 'whsec_forged_0123456789abcdef')],
      ['a stale signature (10 minutes old)', (payload: string) => sign(payload, DEFAULT_WEBHOOK_SECRET, Math.floor(Date.now() / 1000) - 600)],
      ['a signature of other bytes', (payload: string) => sign(`${payload} `)],
    ])('%s: 400 problem+json, nothing changes', async (_name, signature) => {
      const payload = JSON.stringify(event);
      const refused = await deliver(payload, signature(payload)).expect(400);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(refused.body.code).toBe('invalid_webhook_signature');
      expect(await payment(paymentId)).toBe('processing');
      expect(await processedEvents(event.id)).toBe(0);
    });

    it.each([
      ['an empty object', '{}'],
      ['an array', '[]'],
      ['a string', '"payment_intent.succeeded"'],
      ['not JSON', 'payment_intent.succeeded'],
      ['an event without data.object', JSON.stringify({ id: 'evt_1', type: 'payment_intent.succeeded', data: {} })],
      ['an event whose id is a number', JSON.stringify({ id: 1, type: 'payment_intent.succeeded', data: { object: {} } })],
    ])('correctly signed, but %s: 400 invalid_webhook_event, nothing changes', async (_name, payload) => {
      const refused = await deliver(payload, sign(payload));
      expect(refused.status).toBe(400);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(refused.body.code).toBe('invalid_webhook_event');
      expect(await payment(paymentId)).toBe('processing');
      expect(await processedEvents(event.id)).toBe(0);
    });

    it('one event delivered 10 times at once settles the payment once; every delivery gets 200', async () => {
      const payload = JSON.stringify(event);
      const answers = await Promise.all(Array.from({ length: 10 }, () => deliver(payload, sign(payload))));
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
      const effects = answers.map((a) => (a.body as { effect: string }).effect);
      expect(effects.filter((e) => e === 'settled')).toHaveLength(1);
      expect(await payment(paymentId)).toBe('succeeded');
      expect(await processedEvents(event.id)).toBe(1);

      const replay = await pay(key, paymentBody({ source: 'tok_chargeThenHang', description: `webhook drills ${key}` })).expect(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toMatchObject({ id: paymentId, status: 'succeeded' });
    });

    it('a payment_failed arriving after the success changes nothing', async () => {
      const failed = {
        ...event,
        id: `evt_late_${randomUUID().replace(/-/g, '')}`,
        type: 'payment_intent.payment_failed',
        data: {
          object: {
            ...event.data.object,
            status: 'requires_payment_method',
            last_payment_error: { type: 'card_error', code: 'card_declined', decline_code: 'generic_decline', message: 'declined' },
          },
        },
      };
      const payload = JSON.stringify(failed);
      const answer = await deliver(payload, sign(payload)).expect(200);
      expect(answer.body).toEqual({ received: true, effect: 'nothing_to_do' });
      expect(await payment(paymentId)).toBe('succeeded');
      const got = await http().get(`/payments/${paymentId}`).set(t.auth()).expect(200);
      expect(got.body).toMatchObject({ status: 'succeeded', failure_code: null });
    });
  });
});
