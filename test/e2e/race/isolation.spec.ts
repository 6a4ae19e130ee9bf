import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { CLIENT_B, TestApp, countRows, createTestApp } from '../../support/app';
import { paymentBody } from '../../support/fixtures';
import { send } from '../../support/http-client';
import { Attempt, checkHistory, digest, keyOf } from '../../support/history';
import { timed } from '../../../packages/idempotency/test/support/race';

/**
 * Keys are scoped per client: client B racing with client A's key and body at
 * the same moment runs its own payment, and neither can read the other's. The
 * race is checked by the history checker too, one key per client.
 */
describe('isolation between clients (e2e)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ listen: true, env: { CARD_NETWORK_DELAY: '50ms' } });
  });
  afterAll(() => t.close());

  it("executes B's reuse of A's key and body independently, and B cannot read A's payment", async () => {
    const key = randomUUID();
    const body = paymentBody({ amount: 4242, description: `iso ${key}` });
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        timed(request(t.url!).post('/payments').set(t.auth(i % 2 ? CLIENT_B : undefined)).set('Idempotency-Key', key).send(body)),
      ),
    );
    const originals = responses.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
    expect(originals).toHaveLength(2);
    const [a, b] = originals.map((r) => r.json<{ id: string }>().id);
    expect(a).not.toBe(b);
    expect(await countRows(t.dataSource, 'payments', 'description = $1', [`iso ${key}`])).toBe(2);
    expect(responses.every((r) => r.status === 201 || r.status === 409)).toBe(true);

    // Each payment is visible to exactly one client.
    const owners: Record<string, string> = {};
    for (const id of [a, b]) {
      const asA = await send(t.url!, { path: `/payments/${id}`, headers: t.auth() });
      const asB = await send(t.url!, { path: `/payments/${id}`, headers: t.auth(CLIENT_B) });
      expect([asA.status, asB.status].sort()).toEqual([200, 404]);
      owners[id] = asA.status === 200 ? 'A' : 'B';
    }
    expect(Object.values(owners).sort()).toEqual(['A', 'B']);
    const listB = (await send(t.url!, { path: '/payments?limit=100', headers: t.auth(CLIENT_B) })).json<{ data: { id: string }[] }>();
    const idsB = listB.data.map((p: { id: string }) => p.id);
    for (const id of [a, b]) expect(idsB.includes(id)).toBe(owners[id] === 'B');

    // Per client: one effect, one original, every 2xx the same bytes.
    const attempts = responses.map((r, i): Attempt => {
      const ok = r.status === 201;
      return { client: i % 2 ? 'B' : 'A', key, body: digest(JSON.stringify(body)), started: r.started, ended: r.ended, status: r.status, answer: ok ? digest(r.text) : undefined, id: ok ? r.json<{ id: string }>().id : undefined, replayed: r.headers['idempotent-replayed'] === 'true' };
    });
    const ends = new Map(
      (['A', 'B'] as const).map((client) => {
        const recorded = [a, b].filter((id) => owners[id] === client);
        return [keyOf(client, key), { effects: recorded.length, recorded }];
      }),
    );
    expect(checkHistory({ attempts, ends }, { mayRunOnForMs: 0 })).toEqual([]);
  });
});
