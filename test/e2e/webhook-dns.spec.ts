import { TransactionHost } from '@nestjs-cls/transactional';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { AddressInfo } from 'node:net';
import request from 'supertest';
import { HostResolver, ResolvedAddress } from '../../src/addresses/host-resolver';
import { EventsService } from '../../src/events/events.service';
import { CLIENT_B, TestApp, createTestApp } from '../support/app';
import { waitFor } from '../support/http-client';

/**
 * One deadline covers a delivery's whole attempt, its name lookup included.
 * The lookup is HostResolver's, replaced here (Nest's overrideProvider) by one
 * whose system lookup never answers for a name: nothing else is changed (the
 * sharing of a lookup still running among its callers is HostResolver's own). The deadline is the
 * relay's lease when that ends before ATTEMPT_TIMEOUT_MS (15 s), so the
 * suite's app shortens the outbox's lease (its configuration) to 3 s instead
 * of waiting 15 s per attempt.
 */
jest.setTimeout(90_000);

const LEASE_MS = 3_000;
/** Deliveries of one lane (one endpoint) a relay has in flight at once: the library's RELAY_LANE_CAP. */
const RELAY_LANE_CAP = 4;
/** Names under it are never answered. */
const SILENT = '.never-answers.test';

/**
 * The system's lookup, except for names under SILENT: those lookups never
 * answer. Counts, per name, the lookups asked for (`asked`: one per attempt)
 * and those started (`started`: HostResolver joins a lookup still running).
 */
class SilentResolver extends HostResolver {
  readonly asked = new Map<string, number>();
  readonly started = new Map<string, number>();

  override lookup(host: string): Promise<ResolvedAddress[]> {
    if (host.endsWith(SILENT)) this.asked.set(host, (this.asked.get(host) ?? 0) + 1);
    return super.lookup(host);
  }

  protected override systemLookup(host: string): Promise<ResolvedAddress[]> {
    if (!host.endsWith(SILENT)) return super.systemLookup(host);
    this.started.set(host, (this.started.get(host) ?? 0) + 1);
    return new Promise<never>(() => undefined);
  }
}

/** A receiver that answers 204 and notes when each webhook-id arrived. */
class Receiver {
  readonly arrived = new Map<string, number>();
  private readonly server = http.createServer((req, res) => {
    req.resume().on('end', () => {
      this.arrived.set(req.headers['webhook-id'] as string, Date.now());
      res.writeHead(204).end();
    });
  });

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

interface Attempt {
  attempt: number;
  error_class: string | null;
  error: string | null;
  ms: number | null;
}

describe('webhook deliveries: a name lookup that never answers (e2e)', () => {
  let t: TestApp;
  let resolver: SilentResolver;
  let receiver: Receiver;

  beforeAll(async () => {
    resolver = new SilentResolver();
    receiver = await new Receiver().start();
    t = await createTestApp({
      config: (c) => ({ ...c, idempotency: { ...c.idempotency, outbox: { ...c.idempotency.outbox, lease: `${LEASE_MS}ms` } } as typeof c.idempotency }),
      overrides: [{ provide: HostResolver, useValue: resolver }],
    });
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  const register = async (url: string, client?: { key: string }) =>
    (
      await request(t.app.getHttpServer())
        .post('/webhook-endpoints')
        .set(t.auth(client))
        .set('Idempotency-Key', randomUUID())
        .send({ url, event_types: ['order.created'] })
        .expect(201)
    ).body as { id: string };
  const clientId = async (name: string) => (await t.dataSource.query<{ id: string }[]>('SELECT id FROM clients WHERE name = $1', [name]))[0].id;
  /** `n` events of the client's, committed together; their ids. */
  const record = async (client: string, n: number) => {
    const events = t.app.get(EventsService, { strict: false });
    const orders = Array.from({ length: n }, () => `ord_${randomUUID()}`);
    await t.app.get(TransactionHost).withTransaction(async () => {
      for (const id of orders) await events.record(client, 'order.created', { id });
    });
    const rows = await t.dataSource.query<{ id: string }[]>(`SELECT id FROM events WHERE client_id = $1 AND data->>'id' = ANY($2::text[])`, [client, orders]);
    return rows.map((r) => r.id);
  };
  const attempts = (endpointId: string) =>
    t.dataSource.query<Attempt[]>(
      `SELECT attempt, error_class, error, (extract(epoch FROM finished_at - created_at) * 1000)::int AS ms
         FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY created_at, attempt`,
      [endpointId],
    );

  it('ends the attempt at its deadline with error class dns, records it, and retries the message later', async () => {
    const endpoint = await register(`http://one${SILENT}:9/hooks`);
    await record(await clientId('client-a'), 1);

    await waitFor('the first attempt to end', async () => (await attempts(endpoint.id)).some((a) => a.ms !== null));
    const [first] = await attempts(endpoint.id);
    console.log(`an attempt whose lookup never answered ended after ${first.ms} ms (lease ${LEASE_MS} ms): ${first.error_class}, "${first.error}"`);
    expect(first).toEqual({ attempt: 1, error_class: 'dns', error: expect.stringMatching(/^no DNS answer within the attempt's \d+ ms$/), ms: expect.any(Number) });
    // At the deadline (the lease's end), not before, and not at the 15 s of a whole attempt.
    expect(first.ms).toBeGreaterThanOrEqual(LEASE_MS - 100);
    expect(first.ms).toBeLessThan(LEASE_MS + 2_000);
    // The outbox's message: failed, to be tried again, neither delivered nor dead (the relay marks it
    // once the publisher has returned, a moment after the attempt's row is finished).
    const messageOf = async () =>
      (
        await t.dataSource.query<{ attempts: number; delivered: boolean; dead: boolean; later: boolean; last_error: string | null }[]>(
          `SELECT attempts, delivered_at IS NOT NULL AS delivered, dead_at IS NOT NULL AS dead, next_attempt_at > now() AS later, last_error
             FROM idempotency_outbox WHERE payload->>'endpointId' = $1`,
          [endpoint.id],
        )
      )[0];
    await waitFor('the relay to mark the message', async () => (await messageOf()).last_error !== null);
    const message = await messageOf();
    expect(message).toEqual({ attempts: 1, delivered: false, dead: false, later: true, last_error: expect.stringContaining('no DNS answer within') });

    // Its retry, at the schedule's next step (5 s), asks for the name again and ends the same way: it
    // joins the first lookup, still running (abandoned, not ended), so one lookup hangs, not two.
    await waitFor('the second attempt to end', async () => (await attempts(endpoint.id)).filter((a) => a.ms !== null).length === 2);
    expect((await attempts(endpoint.id))[1]).toEqual(expect.objectContaining({ attempt: 2, error_class: 'dns' }));
    expect(resolver.asked.get(`one${SILENT}`)).toBe(2);
    expect(resolver.started.get(`one${SILENT}`)).toBe(1);
  });

  it("holds at most its endpoint's cap of the relay's slots: another client's events are delivered meanwhile", async () => {
    const silent = await register(`http://many${SILENT}:9/hooks`);
    await register(receiver.url(), CLIENT_B);
    const asked = () => resolver.asked.get(`many${SILENT}`) ?? 0;
    await record(await clientId('client-a'), 50);
    await waitFor('the lookups of the silent endpoint', async () => asked() >= RELAY_LANE_CAP);
    const hangingSince = Date.now();

    const committed = new Map<string, number>();
    const b = await clientId('client-b');
    for (let i = 0; i < 20; i++) {
      const [id] = await record(b, 1);
      committed.set(id, Date.now());
      await new Promise((r) => setTimeout(r, 25));
    }
    await waitFor("client B's events", async () => [...committed.keys()].every((id) => receiver.arrived.has(id)));
    const latencies = [...committed].map(([id, at]) => receiver.arrived.get(id)! - at).sort((x, y) => x - y);
    const lookups = asked();
    const within = Date.now() - hangingSince;
    console.log(
      `beside an endpoint whose lookups never answer (50 events queued, ${lookups} deliveries waiting on ${resolver.started.get(`many${SILENT}`)} lookup): commit-to-delivery p50 ${latencies[9]} ms, max ${latencies[19]} ms`,
    );
    expect(latencies[19]).toBeLessThan(1_000);
    // All of it before the silent lookups' deadline: they were waiting the whole time, no more of them than
    // the cap, all on one lookup (not one per delivery).
    expect(within).toBeLessThan(LEASE_MS);
    expect((await attempts(silent.id)).filter((a) => a.ms !== null)).toEqual([]);
    expect(lookups).toBe(RELAY_LANE_CAP);
    expect(resolver.started.get(`many${SILENT}`)).toBe(1);
  });
});
