import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { TestApp, countRows, createTestApp } from '../../support/app';
import { paymentBody } from '../../support/fixtures';

/**
 * Bad input, table-driven, sent as raw HTTP (so keys no HTTP client library
 * would send, control characters and raw non-ASCII bytes, reach the server as
 * written). Each answers its documented status and problem code, and nothing
 * in the database changes.
 */
interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function raw(url: string, head: string, body: Buffer | string = ''): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  const payload = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const [headPart, ...rest] = text.split('\r\n\r\n');
      const [statusLine, ...lines] = headPart.split('\r\n');
      const headers: Record<string, string> = {};
      for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
    socket.write(Buffer.concat([Buffer.from(`${head}Content-Length: ${payload.length}\r\nConnection: close\r\n\r\n`, 'latin1'), payload]));
  });
}

describe('bad input (e2e)', () => {
  let t: TestApp;
  const AUTH = () => `Authorization: Bearer ${t.auth().Authorization.slice('Bearer '.length)}\r\n`;
  const JSON_TYPE = 'Content-Type: application/json\r\n';
  const post = (headers: string, body: Buffer | string = JSON.stringify(paymentBody())) =>
    raw(t.url!, `POST /payments HTTP/1.1\r\nHost: localhost\r\n${headers}`, body);
  const counts = async () => [await countRows(t.dataSource, 'payments'), await countRows(t.dataSource, 'idempotency_keys')];

  beforeAll(async () => {
    t = await createTestApp({ listen: true, env: { HTTP_BODY_LIMIT: '1kb' } });
  });
  afterAll(() => t.close());

  const cases: [string, () => string, (Buffer | string)?, number?, string?][] = [
    ['missing key', () => AUTH() + JSON_TYPE, undefined, 400, 'idempotency_key_missing'],
    ['empty key', () => AUTH() + JSON_TYPE + 'Idempotency-Key: \r\n', undefined, 400, 'idempotency_key_invalid'],
    ['empty quoted key ""', () => AUTH() + JSON_TYPE + 'Idempotency-Key: ""\r\n', undefined, 400, 'idempotency_key_invalid'],
    ['256-character key', () => AUTH() + JSON_TYPE + `Idempotency-Key: ${'k'.repeat(256)}\r\n`, undefined, 400, 'idempotency_key_invalid'],
    ['key with a tab', () => AUTH() + JSON_TYPE + 'Idempotency-Key: a\tb\r\n', undefined, 400, 'idempotency_key_invalid'],
    ['key with a control character', () => AUTH() + JSON_TYPE + 'Idempotency-Key: a\x01b\r\n', undefined, 400, 'bad_request'],
    ['non-ASCII key (raw bytes)', () => AUTH() + JSON_TYPE + 'Idempotency-Key: cl\xe9\r\n', undefined, 400, 'idempotency_key_invalid'],
    ['quoted key with a bad escape', () => AUTH() + JSON_TYPE + 'Idempotency-Key: "a\\nb"\r\n', undefined, 400, 'idempotency_key_invalid'],
    ['invalid JSON', () => AUTH() + JSON_TYPE + `Idempotency-Key: ${randomUUID()}\r\n`, '{"amount": 100,', 400, 'invalid_json'],
    ['wrong Content-Type', () => AUTH() + 'Content-Type: text/plain\r\n' + `Idempotency-Key: ${randomUUID()}\r\n`, 'amount=100', 415, 'unsupported_media_type'],
    ['a charset other than UTF-8', () => AUTH() + 'Content-Type: application/json; charset=utf-16le\r\n' + `Idempotency-Key: ${randomUUID()}\r\n`, Buffer.from(JSON.stringify(paymentBody()), 'utf16le'), 415, 'unsupported_media_type'],
    ['body over the limit', () => AUTH() + JSON_TYPE + `Idempotency-Key: ${randomUUID()}\r\n`, JSON.stringify(paymentBody({ description: 'x'.repeat(2000) })), 413, 'payload_too_large'],
    ['missing auth', () => JSON_TYPE + `Idempotency-Key: ${randomUUID()}\r\n`, undefined, 401, 'unauthorized'],
    ['wrong auth', () => 'Authorization: Bearer sk_not_a_real_key_at_all\r\n' + JSON_TYPE + `Idempotency-Key: ${randomUUID()}\r\n`, undefined, 401, 'unauthorized'],
    ['Basic auth', () => 'Authorization: Basic dXNlcjpwYXNz\r\n' + JSON_TYPE + `Idempotency-Key: ${randomUUID()}\r\n`, undefined, 401, 'unauthorized'],
  ];

  it.each(cases)('%s: documented status and problem code, nothing written', async (_name, headers, body, status, code) => {
    const before = await counts();
    const res = await post(headers(), body);
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(res.body).code).toBe(code);
    expect(await counts()).toEqual(before);
  });

  it('treats a quoted key and its bare form as one key: one payment, then a replay', async () => {
    const key = randomUUID();
    const first = await post(AUTH() + JSON_TYPE + `Idempotency-Key: "${key}"\r\n`);
    const second = await post(AUTH() + JSON_TYPE + `Idempotency-Key: ${key}\r\n`);
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBe('true');
    expect(JSON.parse(second.body).id).toBe(JSON.parse(first.body).id);
  });
});
