import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { join } from 'node:path';
import { INestApplication } from '@nestjs/common';
import { Test as NestTest, TestingModuleBuilder } from '@nestjs/testing';
import { IdempotentConsumer } from 'safe-retries/messages';
import { Webhook } from 'standardwebhooks';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { AppModule } from '../src/app.module';
import { migrate } from '../src/data-source';
import { APPLY_DELAY_MS } from '../src/payment-events.service';
import { WEBHOOK_SECRET } from '../src/webhooks.controller';

/**
 * The example app on Express, with safe-retries and @safe-retries/client installed from
 * their packed tarballs, on the PostgreSQL database that DATABASE_URL names. Deliveries are
 * signed by the `standardwebhooks` package, as any Standard Webhooks sender signs them.
 * Applying an event takes DELAY_MS after its row is written, so deliveries sent at once
 * overlap the first one.
 */
const DELAY_MS = 300;
const SECRET = `whsec_${randomBytes(24).toString('base64')}`;

interface Delivery {
  body: string;
  headers: Record<string, string>;
}

function delivery(secret = SECRET, type = 'payment.succeeded'): Delivery {
  const id = `evt_${randomBytes(8).toString('hex')}`;
  const body = JSON.stringify({ id, type, created_at: new Date().toISOString(), data: { id: `pay_${randomBytes(4).toString('hex')}`, amount: 3998, currency: 'usd' } });
  const at = new Date();
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(id, at, body),
    },
  };
}

async function start(configure: (builder: TestingModuleBuilder) => TestingModuleBuilder = (b) => b): Promise<INestApplication> {
  const moduleRef = await configure(
    NestTest.createTestingModule({ imports: [AppModule] }).overrideProvider(APPLY_DELAY_MS).useValue(DELAY_MS).overrideProvider(WEBHOOK_SECRET).useValue([SECRET]),
  ).compile();
  // rawBody: true, as in src/main.ts: the signature is checked over the bytes received.
  const app = moduleRef.createNestApplication({ rawBody: true, logger: ['error', 'warn'] });
  await app.listen(0, '127.0.0.1'); // supertest then reuses the one listening server for concurrent requests
  return app;
}

describe('webhook-consumer: Standard Webhooks deliveries verified by @safe-retries/client, applied once by IdempotentConsumer', () => {
  let app: INestApplication;
  let db: DataSource;

  const post = (d: Delivery, target = app) => request(target.getHttpServer()).post('/webhooks').set(d.headers).send(d.body);
  const rows = async (d: Delivery) =>
    Number((await db.query(`SELECT count(*)::int AS n FROM payment_events WHERE event_id = $1`, [d.headers['webhook-id']]))[0].n);
  const claims = async (d: Delivery) =>
    Number((await db.query(`SELECT count(*)::int AS n FROM idempotency_messages WHERE message_id = $1`, [d.headers['webhook-id']]))[0].n);

  beforeAll(async () => {
    const url = process.env.DATABASE_URL;
    if (!url) throw new Error('set DATABASE_URL to a PostgreSQL database the tests may create tables in');
    await migrate(url); // the app's migrations; the module creates its own tables at boot
    app = await start();
    db = app.get(DataSource);
  });
  afterAll(async () => {
    await app?.close();
  });

  it('uses safe-retries and @safe-retries/client from its own node_modules', () => {
    for (const name of ['safe-retries', '@safe-retries/client']) {
      expect(realpathSync(require.resolve(name))).toBe(realpathSync(join(__dirname, '..', 'node_modules', name, 'dist', 'index.js')));
    }
  });

  it('applies a delivery posted 5 times once: 200 { processed: true }, then 200 { processed: false }', async () => {
    const d = delivery();
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push((await post(d)).body);
    expect(answers).toEqual([{ processed: true }, ...Array(4).fill({ processed: false })]);
    expect(await rows(d)).toBe(1);
  });

  it('applies a delivery posted 20 times at once once: the duplicates wait for the first, then answer 200', async () => {
    const d = delivery();
    const timed = async () => {
      const started = performance.now();
      const res = await post(d);
      return { status: res.status, processed: (res.body as { processed?: boolean }).processed, started, ended: performance.now() };
    };
    const responses = await Promise.all(Array.from({ length: 20 }, timed));
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200));
    const first = responses.filter((r) => r.processed === true);
    expect(first).toHaveLength(1);
    expect(responses.filter((r) => r.processed === false)).toHaveLength(19);
    // The race was real: all twenty were sent while the first one was being applied.
    expect(responses.filter((r) => r.started < first[0].ended).length).toBe(20);
    expect(await rows(d)).toBe(1);
    expect(await claims(d)).toBe(1);
  });

  it('applies distinct events each once', async () => {
    const [a, b] = [delivery(), delivery(SECRET, 'payment.refunded')];
    await Promise.all([post(a), post(b), post(a), post(b)]);
    expect([await rows(a), await rows(b)]).toEqual([1, 1]);
  });

  it('answers 400 to a bad signature, a tampered body or an old timestamp, and applies nothing', async () => {
    const wrongSecret = delivery(`whsec_${randomBytes(24).toString('base64')}`);
    const tampered = delivery();
    tampered.body = tampered.body.replace('3998', '1');
    const old = delivery();
    old.headers['webhook-timestamp'] = String(Number(old.headers['webhook-timestamp']) - 3600);
    for (const d of [wrongSecret, tampered, old]) {
      const res = await post(d).expect(400);
      expect(res.body.message).toMatch(/signature|timestamp/);
      expect([await rows(d), await claims(d)]).toEqual([0, 0]);
    }
    const unsigned = delivery();
    delete unsigned.headers['webhook-signature'];
    await post(unsigned).expect(400);
    expect(await rows(unsigned)).toBe(0);
  });

  it('the control: without IdempotentConsumer, the same 5 deliveries are applied 5 times', async () => {
    const naive = await start((b) =>
      b.overrideProvider(IdempotentConsumer).useValue({
        process: async (_source: string, _id: string, effect: () => Promise<unknown>) => ({ processed: true, result: await effect() }),
      }),
    );
    try {
      const d = delivery();
      for (let i = 0; i < 5; i++) await post(d, naive).expect(200);
      expect(await rows(d)).toBe(5);
    } finally {
      await naive.close();
    }
  });
});
