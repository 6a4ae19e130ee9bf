import { Readable } from 'node:stream';
import Fastify, { FastifyInstance } from 'fastify';
import { readBody } from '../../src/http/request-body';

/** A body sent one byte per chunk, as a client trickling it does. */
const trickled = (text: string) => Readable.from([...Buffer.from(text)].map((byte) => Buffer.from([byte])));

describe('readBody', () => {
  let app: FastifyInstance;

  beforeAll(async () => {
    app = Fastify({ bodyLimit: 1_000 });
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser('application/json', (request, payload, done) =>
      readBody(request, payload, (error, body) => (error ? done(error, undefined) : done(null, { bytes: body!.length, text: body!.toString('utf8') }))),
    );
    app.post('/', async (request) => request.body);
    app.post('/small', { bodyLimit: 10 }, async (request) => request.body);
    await app.ready();
  });
  afterAll(() => app.close());

  const post = (url: string, payload: string | Readable, headers: Record<string, string> = {}) =>
    app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json', ...headers } });

  it('reads a body trickled a byte per chunk, whole and in order', async () => {
    const text = JSON.stringify({ note: 'é'.repeat(200), n: 1 });
    const res = await post('/', trickled(text), { 'content-length': String(Buffer.byteLength(text)) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ bytes: Buffer.byteLength(text), text });
  });

  it('reads a body without a Content-Length', async () => {
    const res = await post('/', trickled('{"a":1}'));
    expect(res.json()).toEqual({ bytes: 7, text: '{"a":1}' });
  });

  it("refuses a body over the route's limit: on its Content-Length, or once the bytes read pass it", async () => {
    expect((await post('/small', '{"a":"0123456789"}')).statusCode).toBe(413);
    expect((await post('/small', trickled('{"a":"0123456789"}'))).statusCode).toBe(413);
    expect((await post('/', 'x'.repeat(1_001))).statusCode).toBe(413);
  });

  it('refuses a body shorter than its Content-Length', async () => {
    const res = await post('/', trickled('{"a":1}'), { 'content-length': '8' });
    expect(res.statusCode).toBe(400);
  });
});
