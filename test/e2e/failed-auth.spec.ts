import { randomUUID } from 'node:crypto';
import { DynamicModule, Global, Module } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import Stripe from 'stripe';
import request from 'supertest';
import { ClientsService } from '../../src/auth/clients.service';
import { FAILED_AUTH_MAX_ADDRESSES, FailedAuthLimiter } from '../../src/auth/failed-auth.limiter';
import { DEFAULT_WEBHOOK_SECRET } from '../../src/config/config';
import { LOG_DESTINATION } from '../../src/logging/logging.constants';
import { CLIENT_A, TestApp, createTestApp, failedAuthLimit } from '../support/app';
import { createTestDatabase, TestDatabase } from '../support/database';

type Line = Record<string, unknown>;

const signer = new Stripe('sk_test_signer_only');
/** A card network event that settles nothing, signed as the network signs it (200 nothing_to_do). */
function signedEvent(): { payload: string; signature: string } {
  const payload = JSON.stringify({ id: `evt_${randomUUID().replace(/-/g, '')}`, object: 'event', type: 'customer.created', data: { object: { object: 'customer', id: 'cus_1' } } });
  return { payload, signature: signer.webhooks.generateTestHeaderString({ payload, secret: DEFAULT_WEBHOOK_SECRET }) };
}

/** Gives FailedAuthLimiter another cap on tracked addresses. */
@Global()
@Module({})
class MaxAddressesModule {
  static register(max: number): DynamicModule {
    return { module: MaxAddressesModule, providers: [{ provide: FAILED_AUTH_MAX_ADDRESSES, useValue: max }], exports: [FAILED_AUTH_MAX_ADDRESSES] };
  }
}

/** A pino destination that keeps the lines (pino writes one line per write). */
class LogCapture {
  lines: Line[] = [];
  write(chunk: string): void {
    this.lines.push(JSON.parse(chunk) as Line);
  }
  /** The lines of FailedAuthLimiter. */
  auth(): Line[] {
    return this.lines.filter((l) => l.context === 'Auth');
  }
}

/**
 * The failed-auth limiter's address (Fastify's request.ip, X-Forwarded-For
 * only past an HTTP_TRUST_PROXY proxy), its bounded memory, and its one log line a
 * minute. Requests come from 127.0.0.1.
 */
describe('failed authentications by client address (e2e)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  const ATTACKER = '203.0.113.7';
  const OTHER = '198.51.100.9';

  describe('one address for everybody (HTTP_TRUST_PROXY empty, behind a load balancer), at the default budget of 60', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, config: failedAuthLimit(60) });
    });
    afterAll(() => t.close());

    it('a flood of keyless requests blocks the address for routes that need a key, never for health, the docs or a signed webhook', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 65; i++) statuses.push((await http().get('/orders')).status);
      expect(statuses).toEqual([...Array<number>(60).fill(401), ...Array<number>(5).fill(429)]);

      await http().get('/health').expect(200);
      await http().head('/health').expect(200);
      await http().get('/docs-json').expect(200);
      await http().get('/docs').expect(200);
      await http().get('/docs/idempotency').expect(200);
      const { payload, signature } = signedEvent();
      const delivered = await http().post('/webhooks/card-network').set('Content-Type', 'application/json').set('Stripe-Signature', signature).send(payload).expect(200);
      expect(delivered.body).toEqual({ received: true, effect: 'nothing_to_do' });
      // A forged delivery is refused by its signature (its own budget), not by the address's failed authentications.
      const forged = await http().post('/webhooks/card-network').set('Content-Type', 'application/json').set('Stripe-Signature', `t=1,v1=${'0'.repeat(64)}`).send(payload);
      expect(forged.status).toBe(400);

      // Still blocked for requests without a valid key; a valid key works.
      expect((await http().get('/orders')).status).toBe(429);
      await http().get('/orders').set(t.auth(CLIENT_A)).expect(200);
    });
  });

  describe('routes that need a key, before the body is read', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, config: failedAuthLimit(4) });
    });
    afterAll(() => t.close());

    it('answer a keyless malformed, non-JSON or oversized body, or an unknown path, 401: each counted against the address', async () => {
      const malformed = await http().post('/orders').set('Content-Type', 'application/json').send('{"not json');
      const notJson = await http().post('/orders').set('Content-Type', 'text/plain').send('hello');
      const oversized = await http().post('/orders').set('Content-Type', 'application/json').send(`{"a":"${'x'.repeat(200_000)}"}`);
      const unknownPath = await http().get('/no-such-route');
      expect([malformed, notJson, oversized, unknownPath].map((r) => [r.status, r.body.code])).toEqual(Array(4).fill([401, 'unauthorized']));
      // The body announced is not read: the connection closes with the answer.
      for (const r of [malformed, notJson, oversized]) expect(r.headers.connection).toBe('close');
      // The fourth failure reached the budget.
      expect((await http().post('/orders').set('Content-Type', 'application/json').send('{"not json')).status).toBe(429);
      // With a valid key the same body is read and refused on its merits (and counts nothing).
      const keyed = await http().post('/orders').set(t.auth(CLIENT_A)).set('Idempotency-Key', randomUUID()).set('Content-Type', 'application/json').send('{"not json');
      expect([keyed.status, keyed.body.code]).toEqual([400, 'invalid_json']);
    });
  });

  describe('IPv6 clients (HTTP_TRUST_PROXY=127.0.0.1)', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, env: { HTTP_TRUST_PROXY: '127.0.0.1' }, config: failedAuthLimit(3) });
    });
    afterAll(() => t.close());

    it('are counted by their /64: new addresses of the same /64 share its budget, another /64 has its own', async () => {
      for (const address of ['2001:db8:7:1::1', '2001:db8:7:1::2', '2001:db8:7:1:ffff::3']) {
        await http().get('/orders').set('X-Forwarded-For', address).expect(401);
      }
      expect((await http().get('/orders').set('X-Forwarded-For', '2001:db8:7:1:abcd:ef01:2345:6789')).status).toBe(429);
      await http().get('/orders').set('X-Forwarded-For', '2001:db8:7:2::1').expect(401);
    });
  });

  describe('the warning about an untrusted proxy', () => {
    const logOf = async (env: Record<string, string>, peers: string[]) => {
      const log = new LogCapture();
      const t = await createTestApp({ database: db, env: { LOG_LEVEL: 'warn', ...env }, overrides: [{ provide: LOG_DESTINATION, useValue: log }] });
      try {
        const fastify = (t.app as NestFastifyApplication).getHttpAdapter().getInstance();
        for (const remoteAddress of peers) expect((await fastify.inject({ method: 'GET', url: '/health', remoteAddress })).statusCode).toBe(200);
      } finally {
        await t.close();
      }
      return log.auth().filter((l) => String(l.msg).includes('HTTP_TRUST_PROXY'));
    };

    it('is written once, on the first request from a private peer, when HTTP_TRUST_PROXY is empty', async () => {
      expect(await logOf({}, ['127.0.0.1', '::1'])).toEqual([]);
      const lines = await logOf({}, ['127.0.0.1', '10.0.3.7', '10.0.3.8', 'fd00::5']);
      expect(lines).toEqual([expect.objectContaining({ level: 40, peer: '10.0.3.7', msg: expect.stringContaining('list your proxies in HTTP_TRUST_PROXY') })]);
      expect(await logOf({ HTTP_TRUST_PROXY: '10.0.0.0/8' }, ['10.0.3.7'])).toEqual([]);
    });
  });

  describe('behind a trusted proxy (HTTP_TRUST_PROXY=127.0.0.1)', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, env: { HTTP_TRUST_PROXY: '127.0.0.1' }, config: failedAuthLimit(3) });
    });
    afterAll(() => t.close());

    it('limits each forwarded address on its own, and a valid key from the blocked one works', async () => {
      for (let i = 0; i < 3; i++) await http().get('/orders').set('X-Forwarded-For', ATTACKER).set('Authorization', `Bearer sk_guess_${i}_0123456789abcdef`).expect(401);
      expect((await http().get('/orders').set('X-Forwarded-For', ATTACKER)).status).toBe(429);
      // Another client behind the same proxy: not blocked.
      await http().get('/orders').set('X-Forwarded-For', OTHER).expect(401);
      // The proxy's own address is not blocked either.
      await http().get('/orders').expect(401);
      const fresh = await t.app.get(ClientsService).create(`fresh-${randomUUID()}`);
      await http().get('/orders').set('X-Forwarded-For', ATTACKER).set('Authorization', `Bearer ${fresh.apiKey}`).expect(200);
    });
  });

  describe('without HTTP_TRUST_PROXY', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, config: failedAuthLimit(3) });
    });
    afterAll(() => t.close());

    it('ignores X-Forwarded-For: every request is from the peer, 127.0.0.1', async () => {
      for (let i = 0; i < 3; i++) await http().get('/orders').set('X-Forwarded-For', ATTACKER).expect(401);
      expect((await http().get('/orders').set('X-Forwarded-For', OTHER)).status).toBe(429);
      expect((await http().get('/orders')).status).toBe(429);
    });
  });

  describe('a flood from many addresses', () => {
    // A cap of 500 instead of 10,000: the same code, a twentieth of the requests.
    const CAP = 500;
    let t: TestApp;
    const log = new LogCapture();
    beforeAll(async () => {
      t = await createTestApp({
        database: db,
        env: { HTTP_TRUST_PROXY: '127.0.0.1', LOG_LEVEL: 'warn' }, config: failedAuthLimit(1),
        imports: [MaxAddressesModule.register(CAP)],
        overrides: [{ provide: LOG_DESTINATION, useValue: log }],
        listen: true,
      });
    });
    afterAll(() => t.close());

    it('counts at most its cap of addresses below their budget, keeps every blocked one, and writes one summary line', async () => {
      const limiter = t.app.get(FailedAuthLimiter);
      const addresses = 2 * CAP + 100;
      const address = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      const statuses = new Map<number, number>();
      const send = async (i: number) => {
        const res = await fetch(`${t.url}/orders`, { headers: { 'X-Forwarded-For': address(i) } });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      };
      let mostCounted = 0;
      for (let from = 0; from < addresses; from += 100) {
        const batch = Array.from({ length: Math.min(100, addresses - from) }, (_, k) => from + k);
        // Each address fails once (its budget) and is then refused.
        await Promise.all(batch.map((i) => send(i)));
        await Promise.all(batch.map((i) => send(i)));
        mostCounted = Math.max(mostCounted, limiter.countedAddresses);
      }
      expect(Object.fromEntries(statuses)).toEqual({ 401: addresses, 429: addresses });
      // With a budget of one, every address is blocked at its first failure: none is counted below it.
      expect(mostCounted).toBe(0);
      // Blocked addresses are never forgotten to make room, the oldest as the newest.
      expect(limiter.blockedAddresses).toBe(addresses);
      expect(limiter.blockedFor(address(0))).toBeGreaterThan(0);
      expect(limiter.blockedFor(address(addresses - 1))).toBeGreaterThan(0);

      // The first failure was warned at once; the rest wait for the minute's summary.
      expect(log.auth()).toEqual([expect.objectContaining({ level: 40, address: address(0), msg: expect.stringContaining('failed authentication') })]);
      limiter.writeSummary();
      const [, summary, ...more] = log.auth();
      expect(more).toEqual([]);
      expect(summary).toMatchObject({ level: 40, failures: addresses, addresses, blocked: addresses, refused: addresses, counting: 0, blocking: addresses });
      expect(summary.msg).toBe(
        `failed authentications in the last minute: ${addresses} addresses blocked, ${addresses} failures from ${addresses} addresses, ${addresses} requests refused`,
      );
      // A minute with nothing new writes nothing.
      limiter.writeSummary();
      expect(log.auth()).toHaveLength(2);
    });
  });
});
