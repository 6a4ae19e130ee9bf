import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookEvent, WebhookFailure, WebhookVerificationError } from '../src';
import { MAX_SIGNATURES } from '../src/webhooks';

/**
 * Deliveries are signed by the `standardwebhooks` package (the specification's own
 * implementation), so these tests prove that verifyWebhook reads what any Standard
 * Webhooks sender writes.
 */
const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`;

const event: WebhookEvent = {
  id: 'evt_01JQ3B5K8M',
  type: 'payment.succeeded',
  created_at: '2026-12-03T21:00:00.000Z',
  data: { id: 'pay_123', amount: 3998, currency: 'usd', status: 'succeeded' },
};
const body = JSON.stringify(event);

function signed(secret: string, payload = body, at = new Date(), id = event.id): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, at, payload),
  };
}

async function failure(promise: Promise<unknown>): Promise<WebhookFailure> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof WebhookVerificationError)) throw new Error(`expected a WebhookVerificationError, got ${String(error)}`);
  return error.reason;
}

describe('verifyWebhook', () => {
  const secret = newSecret();

  it('returns the parsed event of a delivery signed with the secret (text or bytes, any header shape)', async () => {
    const headers = signed(secret);
    await expect(verifyWebhook(body, headers, secret)).resolves.toEqual(event);
    await expect(verifyWebhook(Buffer.from(body), headers, secret)).resolves.toEqual(event);
    await expect(verifyWebhook(body, new Headers(headers), secret)).resolves.toEqual(event);
    const mixedCase = { 'Webhook-Id': headers['webhook-id'], 'WEBHOOK-TIMESTAMP': headers['webhook-timestamp'], 'webhook-signature': [headers['webhook-signature']] };
    await expect(verifyWebhook(body, mixedCase, secret)).resolves.toEqual(event);
  });

  it('verifies the bytes as sent: non-ASCII text, and a body that is not compact JSON', async () => {
    const text = `{ "id": "evt_2", "type": "order.created", "created_at": "2026-12-03T21:00:00Z", "data": { "memo": "café ☕" } }`;
    await expect(verifyWebhook(Buffer.from(text), signed(secret, text, new Date(), 'evt_2'), secret)).resolves.toMatchObject({ data: { memo: 'café ☕' } });
  });

  it('refuses a tampered body', async () => {
    const headers = signed(secret);
    await expect(failure(verifyWebhook(body.replace('3998', '399800'), headers, secret))).resolves.toBe('invalid_signature');
  });

  it('refuses a delivery whose webhook-id or timestamp was changed: both are signed', async () => {
    const headers = signed(secret);
    await expect(failure(verifyWebhook(body, { ...headers, 'webhook-id': 'evt_other' }, secret))).resolves.toBe('invalid_signature');
    const later = String(Number(headers['webhook-timestamp']) + 1);
    await expect(failure(verifyWebhook(body, { ...headers, 'webhook-timestamp': later }, secret))).resolves.toBe('invalid_signature');
  });

  it('refuses a delivery signed with another secret', async () => {
    await expect(failure(verifyWebhook(body, signed(newSecret()), secret))).resolves.toBe('invalid_signature');
  });

  it('refuses a timestamp beyond the tolerance, in the past or the future; toleranceSeconds widens it', async () => {
    const tenMinutes = 10 * 60_000;
    const old = signed(secret, body, new Date(Date.now() - tenMinutes));
    const future = signed(secret, body, new Date(Date.now() + tenMinutes));
    await expect(failure(verifyWebhook(body, old, secret))).resolves.toBe('invalid_timestamp');
    await expect(failure(verifyWebhook(body, future, secret))).resolves.toBe('invalid_timestamp');
    await expect(verifyWebhook(body, signed(secret, body, new Date(Date.now() - 4 * 60_000)), secret)).resolves.toEqual(event);
    await expect(verifyWebhook(body, old, secret, { toleranceSeconds: 3600 })).resolves.toEqual(event);
    await expect(verifyWebhook(body, signed(secret), secret, { toleranceSeconds: 0 })).resolves.toEqual(event);
    await expect(failure(verifyWebhook(body, { ...old, 'webhook-timestamp': 'yesterday' }, secret))).resolves.toBe('invalid_timestamp');
  });

  it('accepts a list of signatures of which one is valid, skipping other schemes and malformed entries', async () => {
    const headers = signed(secret);
    const others = [`v1,${randomBytes(32).toString('base64')}`, `v1a,${randomBytes(64).toString('base64')}`, 'v1,not base64!', 'garbage'];
    const list = [...others, headers['webhook-signature'], signed(newSecret())['webhook-signature']].join(' ');
    await expect(verifyWebhook(body, { ...headers, 'webhook-signature': list }, secret)).resolves.toEqual(event);
    await expect(failure(verifyWebhook(body, { ...headers, 'webhook-signature': others.join(' ') }, secret))).resolves.toBe('invalid_signature');
  });

  it('refuses a header of more than MAX_SIGNATURES entries before any HMAC, even with the valid one among them', async () => {
    const headers = signed(secret);
    const filler = (n: number) => Array.from({ length: n }, () => `v1,${randomBytes(32).toString('base64')}`);
    const most = [...filler(MAX_SIGNATURES - 1), headers['webhook-signature']].join(' ');
    await expect(verifyWebhook(body, { ...headers, 'webhook-signature': most }, secret)).resolves.toEqual(event);
    const tooMany = [...filler(500), headers['webhook-signature']].join(' ');
    const error = await verifyWebhook(body, { ...headers, 'webhook-signature': tooMany }, secret).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'invalid_signature', message: expect.stringContaining(`501 entries, more than ${MAX_SIGNATURES}`) });
  });

  it("refuses a signed body whose id is not the webhook-id: another event's body under this delivery's id", async () => {
    const other = JSON.stringify({ ...event, id: 'evt_other', type: 'payment.failed' });
    const error = await verifyWebhook(other, signed(secret, other, new Date(), event.id), secret).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'invalid_payload', message: expect.stringContaining('is not the webhook-id') });
  });

  it('accepts either of two secrets while one is rotated, and neither accepts a third', async () => {
    const [before, after] = [newSecret(), newSecret()];
    await expect(verifyWebhook(body, signed(before), [before, after])).resolves.toEqual(event);
    await expect(verifyWebhook(body, signed(after), [before, after])).resolves.toEqual(event);
    // A sender mid-rotation signs with both: the receiver with either secret accepts it.
    const both = { ...signed(before), 'webhook-signature': `${signed(before)['webhook-signature']} ${signed(after)['webhook-signature']}` };
    await expect(verifyWebhook(body, both, after)).resolves.toEqual(event);
    await expect(failure(verifyWebhook(body, signed(newSecret()), [before, after]))).resolves.toBe('invalid_signature');
  });

  it.each(['webhook-id', 'webhook-timestamp', 'webhook-signature'])('refuses a delivery without %s', async (name) => {
    const headers: Record<string, string> = signed(secret);
    delete headers[name];
    const error = await verifyWebhook(body, headers, secret).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WebhookVerificationError);
    expect(error).toMatchObject({ reason: 'missing_header', message: expect.stringContaining(name) });
  });

  it('refuses a correctly signed body that is not an event', async () => {
    for (const payload of ['not json', '[]', '{"id":"evt_1"}', '{"id":"evt_1","type":"x","data":null}']) {
      await expect(failure(verifyWebhook(payload, signed(secret, payload), secret))).resolves.toBe('invalid_payload');
    }
  });

  it('throws a TypeError for a secret that is not whsec_ and base64, or a bad tolerance', async () => {
    const headers = signed(secret);
    await expect(verifyWebhook(body, headers, 'not-a-secret')).rejects.toThrow(TypeError);
    await expect(verifyWebhook(body, headers, 'whsec_')).rejects.toThrow(TypeError);
    await expect(verifyWebhook(body, headers, [])).rejects.toThrow(TypeError);
    await expect(verifyWebhook(body, headers, secret, { toleranceSeconds: -1 })).rejects.toThrow(TypeError);
  });
});
