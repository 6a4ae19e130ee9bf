import { get } from 'node:http';
import { Controller, Get, HttpCode, Logger, Module } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import request from 'supertest';
import { FailedAuthLimiter } from '../../src/auth/failed-auth.limiter';
import { LOG_DESTINATION } from '../../src/logging/logging.constants';
import { LOGGED_REQUEST_HEADERS, MAX_LOGGED_CHARS } from '../../src/logging/request-log.hook';
import { CLIENT_A, TestApp, createTestApp, failedAuthLimit } from '../support/app';
import { waitFor } from '../support/http-client';

type Line = Record<string, unknown>;

/** A pino destination that keeps the lines (pino writes one line per write). */
class LogCapture {
  text = '';
  lines: Line[] = [];
  write(chunk: string): void {
    this.text += chunk;
    this.lines.push(JSON.parse(chunk) as Line);
  }
  /** Bytes written so far. */
  get bytes(): number {
    return Buffer.byteLength(this.text);
  }
  /** The request line of the request with this id (it is written once the response has finished). */
  requestLine(reqId: string): Promise<Line> {
    return waitFor(`the request line of ${reqId}`, () => this.lines.find((l) => l.reqId === reqId && l.req));
  }
  of(reqId: string): Line[] {
    return this.lines.filter((l) => l.reqId === reqId);
  }
}

/** An error of the app's own, as a service would throw. */
class LedgerImbalance extends Error {}

/** Routes that log through Nest's Logger (as a service does), fail unexpectedly, answer a 503 themselves, or wait to be released. */
@Controller('log-demo')
class LogDemoController {
  static waiting?: () => void;
  private readonly logger = new Logger('LogDemo');

  @Get('warn')
  warn() {
    this.logger.warn({ step: 'inside' }, 'a warning inside a request');
    return { ok: true };
  }

  @Get('boom')
  boom() {
    throw new LedgerImbalance('log-demo: unexpected failure');
  }

  @Get('unavailable')
  @HttpCode(503)
  unavailable() {
    return { ok: false };
  }

  @Get('slow')
  async slow() {
    await new Promise<void>((release) => (LogDemoController.waiting = release));
    return { ok: true };
  }
}

@Module({ controllers: [LogDemoController] })
class LogDemoModule {}

/**
 * The log lines of requests: one per finished request at the level of its
 * status (none for a 2xx at warn, none for 401 and 429), with the request id,
 * the request, its allowed headers only, and the response, a 5xx's thrown
 * error; a log written inside a request carries its id.
 */
describe('request logging (e2e)', () => {
  describe('at LOG_LEVEL=warn', () => {
    let t: TestApp;
    const log = new LogCapture();
    const http = () => request(t.app.getHttpServer());
    /** Sends a 404 and waits for its line: every line of an earlier request is written by then. */
    const flush = async (id: string) => {
      await http().get('/no-such-route').set(t.auth()).set('X-Request-Id', id).expect(404);
      await log.requestLine(id);
    };

    beforeAll(async () => {
      t = await createTestApp({
        // Two failed authentications a minute per address: the third is a 429.
        env: { LOG_LEVEL: 'warn' }, config: failedAuthLimit(2),
        imports: [LogDemoModule],
        overrides: [{ provide: LOG_DESTINATION, useValue: log }],
      });
    });
    afterAll(() => t.close());

    it('writes one warn line for a 4xx, with the request id, the request and the response, and only the allowed request headers', async () => {
      const res = await http()
        .get('/orders/00000000-0000-4000-8000-000000000000')
        .set(t.auth())
        .set('Cookie', 'session=cookie-secret-1234')
        .set('X-Card-Network-Signature', 'signature-secret-5678')
        .set('Proxy-Authorization', 'Basic proxy-secret-9012')
        .set('Idempotency-Key', 'log-4xx-key')
        .set('User-Agent', 'log-test/1.0')
        .set('X-Request-Id', 'log-4xx')
        .expect(404);
      expect(res.headers['x-request-id']).toBe('log-4xx');
      const line = await log.requestLine('log-4xx');
      expect(line).toMatchObject({
        level: 40,
        reqId: 'log-4xx',
        req: {
          id: 'log-4xx',
          method: 'GET',
          url: '/orders/00000000-0000-4000-8000-000000000000',
          headers: { 'x-request-id': 'log-4xx', 'idempotency-key': 'log-4xx-key', 'user-agent': 'log-test/1.0' },
        },
        res: { statusCode: 404 },
        msg: 'request completed',
      });
      // No response header, and the query is in the URL only.
      expect(line.res).toEqual({ statusCode: 404 });
      expect(line.req).not.toHaveProperty('query');
      const logged = Object.keys((line.req as { headers: object }).headers);
      expect(logged.every((name) => (LOGGED_REQUEST_HEADERS as readonly string[]).includes(name))).toBe(true);
      for (const name of ['authorization', 'cookie', 'x-card-network-signature', 'proxy-authorization']) expect(logged).not.toContain(name);
      expect(typeof line.responseTime).toBe('number');
      expect(log.of('log-4xx')).toHaveLength(1);
      for (const secret of [CLIENT_A.key, 'cookie-secret-1234', 'signature-secret-5678', 'proxy-secret-9012']) expect(log.text).not.toContain(secret);
    });

    it('writes nothing for a 2xx', async () => {
      await http().get('/orders').set(t.auth()).set('X-Request-Id', 'log-2xx').expect(200);
      await flush('log-2xx-after');
      expect(log.of('log-2xx')).toEqual([]);
    });

    it('carries the request id on a line logged inside the request, the one of X-Request-Id', async () => {
      const res = await http().get('/log-demo/warn').set(t.auth()).expect(200);
      const id = res.headers['x-request-id'];
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      const line = await waitFor('the warning', () => log.lines.find((l) => l.msg === 'a warning inside a request'));
      expect(line).toMatchObject({ level: 40, reqId: id, context: 'LogDemo', step: 'inside' });
      // Outside a request, no request id.
      new Logger('LogDemo').warn('outside any request');
      const outside = log.lines.find((l) => l.msg === 'outside any request');
      expect(outside).toMatchObject({ level: 40, context: 'LogDemo' });
      expect(outside).not.toHaveProperty('reqId');
    });

    it('writes no request line for a 401 or a 429 (the failed authentication is warned once, with its request id)', async () => {
      await http().get('/orders').set('X-Request-Id', 'log-401-a').expect(401);
      await http().get('/orders').set('X-Request-Id', 'log-401-b').expect(401);
      await http().get('/orders').set('X-Request-Id', 'log-429').expect(429);
      await flush('log-401-after');
      expect(log.of('log-401-a')).toEqual([expect.objectContaining({ level: 40, context: 'Auth', msg: expect.stringContaining('failed authentication') })]);
      expect(log.of('log-401-b')).toEqual([]);
      expect(log.of('log-429')).toEqual([]);
    });

    it('writes an error line for a 5xx with the thrown error, where it was thrown, besides the filter’s own line', async () => {
      await http().get('/log-demo/boom').set(t.auth()).set('X-Request-Id', 'log-5xx').expect(500);
      const line = await log.requestLine('log-5xx');
      expect(line).toMatchObject({
        level: 50,
        reqId: 'log-5xx',
        res: { statusCode: 500 },
        err: { class: 'LedgerImbalance', message: 'log-demo: unexpected failure' },
        msg: 'request errored',
      });
      // The stack is the throw's: its first frame is the handler in this file.
      const stack = String((line.err as { stack?: unknown }).stack);
      expect(stack.split('\n')[0]).toBe('Error: log-demo: unexpected failure');
      expect(stack.split('\n')[1]).toMatch(/at LogDemoController\.boom \(.*logging\.spec\.ts:\d+:\d+\)/);
      expect(log.lines.find((l) => l.msg === 'unhandled error')).toMatchObject({ level: 50, reqId: 'log-5xx', context: 'Errors', requestId: 'log-5xx' });
    });

    it('writes no err on a 5xx no exception caused', async () => {
      await http().get('/log-demo/unavailable').set(t.auth()).set('X-Request-Id', 'log-503').expect(503);
      const line = await log.requestLine('log-503');
      expect(line).toMatchObject({ level: 50, res: { statusCode: 503 }, msg: 'request errored' });
      expect(line).not.toHaveProperty('err');
    });
  });

  describe('the size of the log under abuse (LOG_LEVEL=info, the default budget of 60 failed authentications a minute)', () => {
    let t: TestApp;
    const log = new LogCapture();
    const signer = new Stripe('sk_test_signer_only');
    // What a scanner sends: a long query and user agent (within Node's 16 KB of headers), and a body that is not JSON.
    const longUrl = (path: string) => `${path}?${'q='.padEnd(6_000, 'x')}`;
    const longAgent = 'scanner/'.padEnd(6_000, 'y');
    beforeAll(async () => {
      t = await createTestApp({ env: { LOG_LEVEL: 'info' }, config: failedAuthLimit(60), overrides: [{ provide: LOG_DESTINATION, useValue: log }] });
    });
    let closed = false;
    const close = async () => {
      if (!closed) await t.close();
      closed = true;
    };
    afterAll(close);

    it('keeps every request line short: URL and headers cut, no response headers, the query once', async () => {
      await request(t.app.getHttpServer())
        .post(longUrl('/orders'))
        .set(t.auth())
        .set('User-Agent', longAgent)
        .set('Idempotency-Key', 'k'.repeat(3_000))
        .set('X-Request-Id', 'log-long')
        .set('Content-Type', 'application/json')
        .send('{"bad')
        .expect(400);
      const line = await log.requestLine('log-long');
      const req = line.req as { url: string; headers: Record<string, string> };
      expect(req.url).toBe(`${longUrl('/orders').slice(0, MAX_LOGGED_CHARS)}…(${longUrl('/orders').length} chars)`);
      expect(req.headers['user-agent']).toBe(`${longAgent.slice(0, MAX_LOGGED_CHARS)}…(6000 chars)`);
      expect(req.headers['idempotency-key']).toHaveLength(MAX_LOGGED_CHARS + '…(3000 chars)'.length);
      expect(req).not.toHaveProperty('query');
      expect(line.res).toEqual({ statusCode: 400 });
      expect(Buffer.byteLength(JSON.stringify(line))).toBeLessThan(2_048);
    });

    it('writes a few hundred bytes for 200 keyless malformed requests, and two lines per address for 200 forged webhooks', async () => {
      const http = () => request(t.app.getHttpServer());
      const before = log.bytes;
      const keyless: number[] = [];
      for (let i = 0; i < 200; i++) {
        const res = await http().post(longUrl('/orders')).set('User-Agent', longAgent).set('Content-Type', 'application/json').send('{"bad');
        keyless.push(res.status);
      }
      expect(keyless).toEqual([...Array<number>(60).fill(401), ...Array<number>(140).fill(429)]);
      // The failed authentications: one line at once, one summary for the minute.
      t.app.get(FailedAuthLimiter).writeSummary();
      const afterKeyless = log.bytes;
      expect(afterKeyless - before).toBeLessThan(1_024);

      // A public route: 200 forged deliveries from one address, with the same long URL and agent.
      const firstWebhookLine = log.lines.length;
      const forged: number[] = [];
      for (let i = 0; i < 200; i++) {
        const payload = JSON.stringify({ id: `evt_${randomUUID()}`, type: 'customer.created', data: { object: { object: 'customer' } } });
        const signature = signer.webhooks.generateTestHeaderString({ payload, secret: 'whsec_forged_0123456789abcdef' });
        const res = await http().post(longUrl('/webhooks/card-network')).set('User-Agent', longAgent).set('Content-Type', 'application/json').set('Stripe-Signature', signature).send(payload);
        forged.push(res.status);
      }
      expect(forged).toEqual([...Array<number>(60).fill(400), ...Array<number>(140).fill(429)]);
      // The first 400's line, the webhooks' first-failure warning, and (written at closing: the minute is not over) the digest of the other 59.
      await close();
      const webhookLines = log.lines.slice(firstWebhookLine);
      expect(webhookLines.filter((l) => l.req)).toHaveLength(1);
      expect(webhookLines).toContainEqual(expect.objectContaining({ level: 40, address: '127.0.0.1', count: 59, statuses: { 400: 59 } }));
      expect(log.bytes - afterKeyless).toBeLessThan(3_072);
    });
  });

  describe('at LOG_LEVEL=info', () => {
    let t: TestApp;
    const log = new LogCapture();
    beforeAll(async () => {
      t = await createTestApp({ env: { LOG_LEVEL: 'info' }, imports: [LogDemoModule], overrides: [{ provide: LOG_DESTINATION, useValue: log }], listen: true });
    });
    afterAll(() => t.close());

    it('writes an info line for a 2xx, and Nest’s own messages as JSON lines', async () => {
      await request(t.url!).get('/orders').set(t.auth()).set('X-Request-Id', 'log-info-2xx').expect(200);
      expect(await log.requestLine('log-info-2xx')).toMatchObject({ level: 30, res: { statusCode: 200 }, msg: 'request completed' });
      expect(log.lines).toContainEqual(expect.objectContaining({ level: 30, context: 'NestApplication', msg: 'Nest application successfully started' }));
    });

    it('writes one line for a request the client abandons', async () => {
      LogDemoController.waiting = undefined;
      const abandoned = get(`${t.url}/log-demo/slow`, { headers: { ...t.auth(), 'X-Request-Id': 'log-aborted' } });
      abandoned.on('error', () => undefined);
      const release = await waitFor('the slow route to be waiting', () => LogDemoController.waiting);
      abandoned.destroy();
      expect(await log.requestLine('log-aborted')).toMatchObject({ level: 30, req: { url: '/log-demo/slow' }, msg: 'request aborted' });
      // The handler finishing afterwards writes no second line.
      release();
      await request(t.url!).get('/orders').set(t.auth()).set('X-Request-Id', 'log-aborted-after').expect(200);
      await log.requestLine('log-aborted-after');
      expect(log.of('log-aborted')).toHaveLength(1);
    });
  });
});
