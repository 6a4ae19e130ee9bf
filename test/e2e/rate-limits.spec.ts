import { randomBytes, randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import request from 'supertest';
import { ClientKeysRepository } from '../../src/auth/client-keys.repository';
import { ClientsService } from '../../src/auth/clients.service';
import { CLIENT_A, CLIENT_B, TestApp, createTestApp, failedAuthLimit } from '../support/app';
import { waitFor } from '../support/http-client';

/** The app's repository of client keys, counting the queries it runs (each on the main pool). */
@Injectable()
class CountingClientKeysRepository extends ClientKeysRepository {
  /** Lookups of one key by its hash. */
  lookups = 0;
  /** Reads of every active key. */
  reads = 0;

  override activeKey(hash: Buffer) {
    this.lookups++;
    return super.activeKey(hash);
  }

  /** Reads of every active key that have returned their rows. */
  readsDone = 0;

  override async activeKeys() {
    this.reads++;
    const rows = await super.activeKeys();
    this.readsDone++;
    return rows;
  }
}

/** Per client (RATE_LIMIT_PER_CLIENT a second) and per address for failed authentications (60 a minute; failedAuthLimit here). */
describe('rate limits (e2e)', () => {
  const expectRateLimited = (res: request.Response) => {
    expect(res.status).toBe(429);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  };

  describe('per client', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ env: { RATE_LIMIT_PER_CLIENT: '5' } });
    });
    afterAll(() => t.close());

    it('answers a client over its limit 429 rate_limited, across routes, while another client and public routes are served', async () => {
      // Within one window (a second): 5 requests pass, on different routes. That they
      // shared one window is told by the answers themselves: the budget left counts
      // down 4..0 and the next two are refused (a new window would start at 4 again).
      const served = [];
      for (const path of ['/orders', '/payments', '/orders', '/payments', '/orders']) served.push(await http().get(path).set(t.auth(CLIENT_A)).expect(200));
      const over = await http().get('/orders').set(t.auth(CLIENT_A));
      const post = await http().post('/payments').set(t.auth(CLIENT_A)).set('Idempotency-Key', randomUUID()).send({});
      const other = await http().get('/orders').set(t.auth(CLIENT_B));
      for (let i = 0; i < 10; i++) await http().get('/health').expect(200);
      expectRateLimited(over);
      expectRateLimited(post);
      expect(other.status).toBe(200);
      // The budget is told on every counted answer (the throttler's headers, named after it).
      expect(served.map((r) => [r.headers['x-ratelimit-limit-client'], r.headers['x-ratelimit-remaining-client']])).toEqual(
        ['4', '3', '2', '1', '0'].map((left) => ['5', left]),
      );
      for (const r of served) expect(Number(r.headers['x-ratelimit-reset-client'])).toBe(1);
      expect(Number(over.headers['retry-after-client'])).toBeGreaterThan(0);
      expect(other.headers['x-ratelimit-remaining-client']).toBe('4');
      const health = await http().get('/health').expect(200);
      expect(health.headers['x-ratelimit-limit-client']).toBeUndefined();
    });
  });

  describe('failed authentications per address', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ config: failedAuthLimit(10) });
    });
    afterAll(() => t.close());

    it('answers a flood of bad keys 429 before the body is parsed, while a valid key works', async () => {
      // Created after the app started and never used.
      const fresh = await t.app.get(ClientsService).create(`fresh-${randomUUID()}`);
      const freshAuth = { Authorization: `Bearer ${fresh.apiKey}` };
      for (let i = 0; i < 10; i++) {
        await http().get('/orders').set('Authorization', `Bearer sk_guess_${i}_0123456789abcdef`).expect(401);
      }
      expectRateLimited(await http().get('/orders').set('Authorization', 'Bearer sk_guess_next_0123456789abcdef'));
      expectRateLimited(await http().get('/orders'));
      // Refused before the body parser: invalid JSON is not even read (else 400 invalid_json).
      expectRateLimited(await http().post('/orders').set('Content-Type', 'application/json').send('{"not json'));
      expectRateLimited(await http().post('/orders').set('Authorization', 'Bearer sk_guess_post_0123456789abcdef').set('Content-Type', 'application/json').send('{"not json'));
      // Valid keys work from the same address: the fresh one, and one seen before.
      await http().get('/orders').set(freshAuth).expect(200);
      await http().post('/orders').set(freshAuth).set('Idempotency-Key', randomUUID()).send({ currency: 'usd', items: [{ sku: 'a', quantity: 1, unit_amount: 1 }] }).expect(201);
      await http().get('/orders').set(t.auth(CLIENT_A)).expect(200);
      // Still blocked for anything else.
      expectRateLimited(await http().get('/orders'));
    });
  });

  describe('requests without a key (a client that opens its connections with unauthenticated GETs)', () => {
    let t: TestApp;
    const http = () => request(t.app.getHttpServer());
    beforeAll(async () => {
      t = await createTestApp({ config: failedAuthLimit(3) });
    });
    afterAll(() => t.close());

    it('block the address for requests without a valid key only', async () => {
      for (let i = 0; i < 3; i++) await http().get('/orders').expect(401);
      expectRateLimited(await http().get('/payments'));
      const fresh = await t.app.get(ClientsService).create(`fresh-${randomUUID()}`);
      for (const path of ['/orders', '/payments', '/orders']) {
        await http().get(path).set('Authorization', `Bearer ${fresh.apiKey}`).expect(200);
      }
      await http().get('/orders').set(t.auth(CLIENT_B)).expect(200);
    });
  });

  describe('made-up keys (counted: the queries of ClientKeysRepository)', () => {
    let t: TestApp;
    let repository: CountingClientKeysRepository;
    // Each test sends from addresses of its own (X-Forwarded-For, past the trusted 127.0.0.1).
    const from = (address: string) => ({ 'X-Forwarded-For': address });
    const madeUp = () => ({ Authorization: `Bearer sk_${randomBytes(32).toString('base64url')}` });
    const statuses = (answers: request.Response[]) => {
      const counts: Record<number, number> = {};
      for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
      return counts;
    };
    beforeAll(async () => {
      t = await createTestApp({
        env: { HTTP_TRUST_PROXY: '127.0.0.1' }, config: failedAuthLimit(10),
        overrides: [{ provide: ClientKeysRepository, useClass: CountingClientKeysRepository }],
        listen: true,
      });
      repository = t.app.get(ClientKeysRepository);
    });
    afterAll(() => t.close());

    it('cost one query each up to the address budget, however many arrive at once, and none once it is blocked', async () => {
      const http = () => request(t.url!);
      const before = repository.lookups;
      // 300 at once from an address within its budget: its lookups run in turn and stop at the budget.
      const burst = await Promise.all(Array.from({ length: 300 }, () => http().get('/orders').set(from('203.0.113.10')).set(madeUp())));
      expect(statuses(burst)).toEqual({ 401: 10, 429: 290 });
      expect(repository.lookups - before).toBe(10);
      // 300 more from the blocked address: refused before any lookup.
      const blocked: request.Response[] = [];
      for (let i = 0; i < 300; i++) blocked.push(await http().get('/orders').set(from('203.0.113.10')).set(madeUp()));
      expect(statuses(blocked)).toEqual({ 429: 300 });
      expect(repository.lookups - before).toBe(10);
      // A key the instance holds still works from that address, with no query either.
      await http().get('/orders').set(from('203.0.113.10')).set(t.auth()).expect(200);
      expect(repository.lookups - before).toBe(10);
    });

    it('the same unknown key again costs no query for a few seconds', async () => {
      const before = repository.lookups;
      const key = madeUp();
      for (let i = 0; i < 5; i++) await request(t.url!).get('/orders').set(from('203.0.113.20')).set(key).expect(401);
      expect(repository.lookups - before).toBe(1);
    });

    it('a key created by another instance works at once from an address within its budget, and from a blocked one once the keys are read again', async () => {
      const http = () => request(t.url!);
      const insertKey = async (name: string) => {
        const key = `sk_${randomBytes(32).toString('base64url')}`;
        await t.dataSource.query('INSERT INTO clients (name) VALUES ($1)', [name]);
        await t.dataSource.query(`INSERT INTO client_keys (client_id, key_hash) SELECT id, sha256($2::text::bytea) FROM clients WHERE name = $1`, [name, key]);
        return { Authorization: `Bearer ${key}` };
      };
      for (let i = 0; i < 10; i++) await http().get('/orders').set(from('203.0.113.30')).expect(401);

      const first = await insertKey(`elsewhere-${randomUUID()}`);
      let before = repository.lookups;
      // From the blocked address: refused without a lookup, until this instance holds it.
      expect((await http().get('/orders').set(from('203.0.113.30')).set(first)).status).toBe(429);
      expect(repository.lookups - before).toBe(0);
      // From another address: one lookup, and the instance holds it from then on.
      await http().get('/orders').set(from('203.0.113.31')).set(first).expect(200);
      expect(repository.lookups - before).toBe(1);
      await http().get('/orders').set(from('203.0.113.30')).set(first).expect(200);
      expect(repository.lookups - before).toBe(1);

      // Left to the periodic read of the active keys (every 4 s): works from the blocked address, no lookup.
      const second = await insertKey(`elsewhere-${randomUUID()}`);
      before = repository.lookups;
      const reads = repository.reads;
      await waitFor('the key to be read', async () => (await http().get('/orders').set(from('203.0.113.30')).set(second)).status === 200, { intervalMs: 250 });
      expect(repository.lookups - before).toBe(0);
      expect(repository.reads).toBeGreaterThan(reads);
    });
  });
});

describe('a removed key (e2e)', () => {
  let t: TestApp;
  let repository: CountingClientKeysRepository;
  beforeAll(async () => {
    t = await createTestApp({ overrides: [{ provide: ClientKeysRepository, useClass: CountingClientKeysRepository }] });
    repository = t.app.get(ClientKeysRepository);
  });
  afterAll(() => t.close());

  it('stops working at the periodic read of the active keys after its client is deleted, though it was cached', async () => {
    const http = () => request(t.app.getHttpServer());
    await t.dataSource.query(`INSERT INTO clients (name) VALUES ('short-lived')`);
    await t.dataSource.query(
      `INSERT INTO client_keys (client_id, key_hash) SELECT id, sha256('sk_short_lived_0123456789abcdef'::bytea) FROM clients WHERE name = 'short-lived'`,
    );
    const auth = { Authorization: 'Bearer sk_short_lived_0123456789abcdef' };
    await http().get('/orders').set(auth).expect(200);
    await t.dataSource.query(`DELETE FROM clients WHERE name = 'short-lived'`);
    // Reads run one at a time: once as many have returned as had begun by now, plus one,
    // a read that began after the delete has returned (every KEY_SET_RELOAD_MS; the guard is generous).
    const next = repository.reads + 1;
    await waitFor('a read of the active keys begun after the delete', () => repository.readsDone >= next, { seen: () => repository.readsDone });
    const lookups = repository.lookups;
    expect((await http().get('/orders').set(auth)).status).toBe(401);
    // Refused because the read dropped it: asked once more, found nowhere.
    expect(repository.lookups - lookups).toBe(1);
  });
});
