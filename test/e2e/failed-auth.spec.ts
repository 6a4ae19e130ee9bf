import { randomUUID } from 'node:crypto';
import { DynamicModule, Global, Module } from '@nestjs/common';
import request from 'supertest';
import { ClientsService } from '../../src/auth/clients.service';
import { FAILED_AUTH_MAX_ADDRESSES, FailedAuthLimiter } from '../../src/auth/failed-auth.limiter';
import { LOG_DESTINATION } from '../../src/logging/logging.constants';
import { TestApp, createTestApp } from '../support/app';
import { createTestDatabase, TestDatabase } from '../support/database';

type Line = Record<string, unknown>;

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
 * only past a TRUST_PROXY proxy), its bounded memory, and its one log line a
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

  describe('behind a trusted proxy (TRUST_PROXY=127.0.0.1)', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, env: { TRUST_PROXY: '127.0.0.1', RATE_LIMIT_UNAUTHENTICATED: '3' } });
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

  describe('without TRUST_PROXY', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ database: db, env: { RATE_LIMIT_UNAUTHENTICATED: '3' } });
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
        env: { TRUST_PROXY: '127.0.0.1', RATE_LIMIT_UNAUTHENTICATED: '1', LOG_LEVEL: 'warn' },
        imports: [MaxAddressesModule.register(CAP)],
        overrides: [{ provide: LOG_DESTINATION, useValue: log }],
        listen: true,
      });
    });
    afterAll(() => t.close());

    it('tracks at most its cap of addresses and writes one summary line, not one per address', async () => {
      const limiter = t.app.get(FailedAuthLimiter);
      const addresses = 2 * CAP + 100;
      const address = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      const statuses = new Map<number, number>();
      const send = async (i: number) => {
        const res = await fetch(`${t.url}/orders`, { headers: { 'X-Forwarded-For': address(i) } });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      };
      let mostTracked = 0;
      for (let from = 0; from < addresses; from += 100) {
        const batch = Array.from({ length: Math.min(100, addresses - from) }, (_, k) => from + k);
        // Each address fails once (its budget) and is then refused.
        await Promise.all(batch.map((i) => send(i)));
        await Promise.all(batch.map((i) => send(i)));
        mostTracked = Math.max(mostTracked, limiter.trackedAddresses);
      }
      expect(Object.fromEntries(statuses)).toEqual({ 401: addresses, 429: addresses });
      expect(mostTracked).toBe(CAP);
      // The newest addresses are still blocked.
      expect(limiter.blockedFor(address(addresses - 1))).toBeGreaterThan(0);

      // The first failure was warned at once; the rest wait for the minute's summary.
      expect(log.auth()).toEqual([expect.objectContaining({ level: 40, address: address(0), msg: expect.stringContaining('failed authentication') })]);
      limiter.writeSummary();
      const [, summary, ...more] = log.auth();
      expect(more).toEqual([]);
      expect(summary).toMatchObject({ level: 40, failures: addresses, addresses, blocked: addresses, refused: addresses, tracked: CAP });
      expect(summary.msg).toBe(
        `failed authentications in the last minute: ${addresses} addresses blocked, ${addresses} failures from ${addresses} addresses, ${addresses} requests refused`,
      );
      // A minute with nothing new writes nothing.
      limiter.writeSummary();
      expect(log.auth()).toHaveLength(2);
    });
  });
});
