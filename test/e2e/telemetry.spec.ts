import { randomUUID } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import request from 'supertest';
import { IDEMPOTENCY_EVENTS_CHANNEL, IdempotencyEvent } from 'safe-retries/telemetry';
import { keyId } from '../../packages/idempotency/test/support/keys-table';
import { TestApp, createTestApp } from '../support/app';
import { paymentBody } from '../support/fixtures';

/**
 * Traces and events of one payment, as an app with the OpenTelemetry SDK sees
 * them (here its in-memory exporter) and as a `node:diagnostics_channel`
 * subscriber does: the request's span around the claim, each phase and each
 * card network call, in order, all naming the operation, the scope and the
 * key's id, never the key; and the outcomes (claimed, replayed) as events.
 */
describe('traces and diagnostics events (e2e)', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  const events: IdempotencyEvent[] = [];
  const onEvent = (message: unknown) => events.push(message as IdempotencyEvent);
  let t: TestApp;

  beforeAll(async () => {
    context.setGlobalContextManager(contextManager.enable());
    trace.setGlobalTracerProvider(provider);
    subscribe(IDEMPOTENCY_EVENTS_CHANNEL, onEvent);
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
    unsubscribe(IDEMPOTENCY_EVENTS_CHANNEL, onEvent);
    trace.disable();
    context.disable();
    await provider.shutdown();
  });

  it("one payment: its spans in order under the request's, the outcomes as events, never the key", async () => {
    exporter.reset();
    const key = `telemetry-${randomUUID()}`;
    const body = paymentBody({ description: `traced ${key}` });
    const paid = await request(t.app.getHttpServer()).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body).expect(201);
    const [{ id: scope }] = await t.dataSource.query<{ id: string }[]>('SELECT client_id::text AS id FROM payments WHERE id = $1', [paid.body.id]);

    const spans = exporter.getFinishedSpans().filter((s) => s.name.startsWith('idempotency.'));
    const root = spans.find((s) => s.name === 'idempotency.request')!;
    expect(root).toBeDefined();
    const children = spans.filter((s) => s.parentSpanContext?.spanId === root.spanContext().spanId).sort(byStart);
    expect(children.map((s) => s.name)).toEqual([
      'idempotency.claim',
      'idempotency.checkpoint started',
      'idempotency.call card_network.create_intent',
      'idempotency.checkpoint intent',
      'idempotency.call card_network.confirm_intent',
      'idempotency.finish',
    ]);
    const subject = { 'idempotency.scope': scope, 'idempotency.key_id': keyId(scope, key), 'idempotency.operation': 'payments.create' };
    for (const span of [root, ...children]) expect(span.attributes).toEqual(subject);
    expect(root.events.map((e) => e.name)).toEqual(['idempotency.claimed']);
    expect(JSON.stringify(spans.map((s) => [s.attributes, s.events]))).not.toContain(key);

    // The retry: a replay, told as an event too.
    await request(t.app.getHttpServer()).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(body).expect(201);
    const mine = events.filter((e) => e.keyId === keyId(scope, key));
    expect(mine.map((e) => e.name)).toEqual(['claimed', 'replayed']);
    expect(mine[0]).toEqual({ name: 'claimed', scope, keyId: keyId(scope, key), operation: 'payments.create' });
  });
});

function byStart(a: ReadableSpan, b: ReadableSpan): number {
  return a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1];
}
