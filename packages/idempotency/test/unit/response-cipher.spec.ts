import { createCipheriv, randomBytes } from 'node:crypto';
import { ArgumentsHost, Body, Catch, Controller, ExceptionFilter, HttpException, Module, Post, Res } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import request from 'supertest';
import { HttpResponse, IDEMPOTENT_OUTCOME, Idempotent, parseKeyRing } from 'safe-retries';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from '../support/library-app';
import { keyId } from '../support/keys-table';
import { TestDatabase, createDatabase } from '../support/test-services';

/**
 * Stored responses at rest, as an app meets them: a route's answer is stored
 * in the keys table's `status`, `body` and `headers` (docs/security.md, "What
 * is stored"), sealed under `postgres.encryptionKeys` (newest first) or in
 * clear without them, and every retry is answered from that row. A row that
 * cannot be believed (edited, moved from another key, in clear under a key
 * ring, its key gone from the ring) answers its retry an error, never a wrong
 * answer. The rows are read and edited here as an operator (or an attacker
 * with the database) could.
 */
const key = (byte: number) => Buffer.alloc(32, byte);
const ring = (...ids: string[]) => ids.map((id) => `${id}:${key(Number(id.slice(1))).toString('base64')}`);
const KEY = 'order-7';
const response = { status: 201, body: '{"id":"pay_1","amount":1250}', contentType: 'application/json; charset=utf-8', location: '/payments/pay_1' };
const declined = { ...response, status: 402, body: '{"error":"card_declined"}' };

interface Payment {
  id: string;
  amount?: number;
  location?: string;
  declined?: boolean;
}

@Controller('cipher')
class Payments {
  @Post('payments')
  @Idempotent()
  create(@Body() body: Payment, @Res({ passthrough: true }) res: unknown) {
    if (body.declined) {
      throw { [IDEMPOTENT_OUTCOME]: () => ({ status: declined.status, contentType: declined.contentType, body: declined.body }) };
    }
    if (body.location) HttpResponse.of(res).setHeader('Location', body.location);
    return { id: body.id, amount: body.amount };
  }
}

/** The app's own last resort: an error that is no HTTP answer is a 500 whose body names it (what its server log would say). */
@Catch()
class ErrorsAsAnswers implements ExceptionFilter {
  catch(error: unknown, host: ArgumentsHost) {
    const res = host.switchToHttp().getResponse<{ status(code: number): { json(body: unknown): void } }>();
    if (error instanceof HttpException) return res.status(error.getStatus()).json(error.getResponse());
    res.status(500).json({ error: (error as Error).name, message: (error as Error).message });
  }
}

@Module({ controllers: [Payments], providers: [{ provide: APP_FILTER, useClass: ErrorsAsAnswers }] })
class PaymentsModule {}

let db: TestDatabase;
const apps = new Map<string, LibraryApp>();
/** The app with this key ring (none: responses in clear), all on one database. */
async function appWith(keys: string[]): Promise<LibraryApp> {
  const name = keys.join(',');
  let lib = apps.get(name);
  if (!lib) {
    lib = await createLibraryApp('express', { database: db, idempotency: { replayCache: { enabled: false }, postgres: { encryptionKeys: keys } }, imports: [PaymentsModule] });
    apps.set(name, lib);
  }
  return lib;
}

beforeAll(async () => (db = await createDatabase()));
afterAll(async () => {
  for (const lib of apps.values()) await lib.close();
  await db?.drop();
});

let principals = 0;
/** A principal of its own for each request: the same key (order-7) is a row of its own each time. */
const newPrincipal = () => `cipher-${++principals}-${randomBytes(3).toString('hex')}`;

/** The request `payment` under `principal` with the key order-7, answered by `lib`. */
async function send(lib: LibraryApp, principal: string, payment: Payment = { id: 'pay_1', amount: 1250, location: response.location }) {
  const r = await request(lib.app.getHttpServer())
    .post('/cipher/payments')
    .set(PRINCIPAL_HEADER, principal)
    .set('Idempotency-Key', KEY)
    .send(payment)
    .buffer(true)
    .parse((res, done) => {
      // The body's bytes as sent, whatever its Content-Type says.
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done(null, text));
    });
  return { status: r.status, body: r.body as string, contentType: r.headers['content-type'] as string, location: r.headers.location as string | undefined, replayed: r.headers['idempotent-replayed'] };
}

/** A stored answer as a replay gives it back (undefined fields dropped, as in the stored response). */
const answered = async (lib: LibraryApp, principal: string, payment?: Payment) => {
  const { status, body, contentType, location, replayed } = await send(lib, principal, payment);
  expect(replayed).toBe('true');
  return location === undefined ? { status, body, contentType } : { status, body, contentType, location };
};

/** The refusal of a retry whose stored response cannot be believed: the app's 500, naming the module's error and its reason. */
const refusal = async (lib: LibraryApp, principal: string, payment?: Payment) => {
  const r = await send(lib, principal, payment);
  expect(r.status).toBe(500);
  return JSON.parse(r.body) as { error: string; message: string };
};

type Row = { status: number; body: string; headers: string | null };
const rowOf = async (lib: LibraryApp, principal: string): Promise<Row> =>
  (await lib.dataSource.query<Row[]>(`SELECT status, body, headers FROM "${LIBRARY_TABLE}" WHERE id = $1`, [keyId(principal, KEY)]))[0];
const edit = (lib: LibraryApp, principal: string, row: Partial<Row>) =>
  lib.dataSource.query(`UPDATE "${LIBRARY_TABLE}" SET status = coalesce($2, status), body = coalesce($3, body), headers = CASE WHEN $4 THEN $5 ELSE headers END WHERE id = $1`, [
    keyId(principal, KEY),
    row.status ?? null,
    row.body ?? null,
    'headers' in row,
    row.headers ?? null,
  ]);

/** Stores the payment under a new principal, with the app of this ring: the principal. */
async function stored(keys: string[], payment?: Payment): Promise<string> {
  const principal = newPrincipal();
  const first = await send(await appWith(keys), principal, payment);
  expect(first.status).toBe(payment?.declined ? 402 : 201);
  return principal;
}

describe('stored responses, sealed or in clear', () => {
  it('without keys stores the body as sent and only non-default headers', async () => {
    const plain = await appWith([]);
    const bare = await stored([], { id: 'pay_1', amount: 1250 });
    expect(await rowOf(plain, bare)).toEqual({ status: 201, body: response.body, headers: null });
    const withLocation = await stored([]);
    expect((await rowOf(plain, withLocation)).body).toBe(response.body);
    expect(await answered(plain, withLocation)).toEqual(response);
  });

  it('seals body and headers under the newest key; opens them byte for byte', async () => {
    const lib = await appWith(ring('k2', 'k1'));
    const principal = await stored(ring('k2', 'k1'));
    const sealed = await rowOf(lib, principal);
    expect(sealed.body).not.toContain('pay_1');
    expect(sealed.headers).not.toContain('/payments');
    expect(JSON.parse(sealed.headers!)).toMatchObject({ v: 2, k: 'k2' });
    expect(await answered(lib, principal)).toEqual(response);
    // A fresh IV each time: the same response never seals to the same bytes.
    expect((await rowOf(lib, await stored(ring('k2', 'k1')))).body).not.toBe(sealed.body);
  });

  it('opens records of an older key of the ring; refuses a key that left the ring, naming both keys', async () => {
    const old = await stored(ring('k1'));
    expect(await answered(await appWith(ring('k2', 'k1')), old)).toEqual(response);
    expect((await refusal(await appWith(ring('k2')), old)).message).toMatch(
      /the stored response of idempotency key "order-7" is sealed with encryption key "k1", which is not in the key ring/,
    );
  });

  describe('binds the status, the headers and the sealed marker (authenticated data)', () => {
    const refused = /the stored response of idempotency key "order-7" does not open with encryption key "k1": its status, headers or body were changed/;

    it('a stored 402 edited into a 201 is refused', async () => {
      const lib = await appWith(ring('k1'));
      const principal = await stored(ring('k1'), { id: 'pay_1', declined: true });
      const { location: _none, ...answer } = declined;
      expect(await answered(lib, principal, { id: 'pay_1', declined: true })).toEqual(answer);
      await edit(lib, principal, { status: 201 });
      const error = await refusal(lib, principal, { id: 'pay_1', declined: true });
      expect(error.message).toMatch(refused);
      expect(error.error).toBe('SealedResponseError');
    });

    it("another row's headers, or none, under this body are refused", async () => {
      const lib = await appWith(ring('k1'));
      const principal = await stored(ring('k1'));
      const other = await rowOf(lib, await stored(ring('k1'), { id: 'pay_1', amount: 1250, location: '/payments/pay_2' }));
      await edit(lib, principal, { headers: other.headers });
      expect((await refusal(lib, principal)).message).toMatch(refused);
      const again = await stored(ring('k1'));
      await edit(lib, again, { headers: JSON.stringify({ v: 2, k: 'k1', h: null }) });
      expect((await refusal(lib, again)).message).toMatch(refused);
    });

    it('a whole row moved to another key is refused', async () => {
      const lib = await appWith(ring('k1'));
      const from = await rowOf(lib, await stored(ring('k1')));
      const to = await stored(ring('k1'));
      await edit(lib, to, { body: from.body, headers: from.headers });
      expect((await refusal(lib, to)).message).toMatch(refused);
    });

    it('the marker dropped (the row made to look sealed before binding, or in clear) is refused', async () => {
      const lib = await appWith(ring('k1'));
      const dropped = await stored(ring('k1'));
      const { h } = JSON.parse((await rowOf(lib, dropped)).headers!) as { h: string };
      await edit(lib, dropped, { headers: JSON.stringify({ k: 'k1', h }) });
      expect((await refusal(lib, dropped)).message).toMatch(refused);
      const inClear = await stored(ring('k1'));
      await edit(lib, inClear, { body: '{"id":"pay_forged"}', headers: null });
      expect((await refusal(lib, inClear)).message).toMatch(
        /the stored response of idempotency key "order-7" is stored in clear, and stored responses are sealed \(encryption key "k1"\): refused/,
      );
      const plainType = await stored(ring('k1'));
      await edit(lib, plainType, { body: '{"id":"pay_forged"}', headers: '{"ct":"text/plain"}' });
      expect((await refusal(lib, plainType)).message).toMatch(/is stored in clear/);
      const notJson = await stored(ring('k1'));
      await edit(lib, notJson, { headers: 'not json' });
      expect((await refusal(lib, notJson)).message).toMatch(/headers column that is not the module's JSON/);
    });

    it('a row sealed before the binding (bound to its row alone) still opens', async () => {
      const lib = await appWith(ring('k1'));
      const principal = await stored(ring('k1'));
      const row = keyId(principal, KEY);
      const v1 = (text: string) => {
        const iv = randomBytes(12);
        const c = createCipheriv('aes-256-gcm', key(1), iv);
        c.setAAD(Buffer.from(row));
        const sealed = Buffer.concat([c.update(text, 'utf8'), c.final()]);
        return Buffer.concat([iv, c.getAuthTag(), sealed]).toString('base64');
      };
      const headers = JSON.stringify({ k: 'k1', h: v1(JSON.stringify({ ct: response.contentType, loc: response.location })) });
      await edit(lib, principal, { body: v1(response.body), headers });
      expect(await answered(lib, principal)).toEqual(response);
    });
  });

  it('without keys opens rows in clear', async () => {
    const plain = await appWith([]);
    const principal = await stored([]);
    await edit(plain, principal, { status: 200, body: 'plain', headers: null });
    const { status, body, contentType } = await send(plain, principal);
    expect({ status, body, contentType }).toEqual({ status: 200, body: 'plain', contentType: 'application/json; charset=utf-8' });
  });

  it("binds a sealed response to its row: another row's id, or a changed byte, does not open", async () => {
    const lib = await appWith(ring('k1'));
    const from = await rowOf(lib, await stored(ring('k1')));
    const moved = await stored(ring('k1'));
    await edit(lib, moved, { body: from.body, headers: from.headers });
    await refusal(lib, moved);
    const changed = await stored(ring('k1'));
    const bytes = Buffer.from((await rowOf(lib, changed)).body, 'base64');
    bytes[bytes.length - 1] ^= 1;
    await edit(lib, changed, { body: bytes.toString('base64') });
    await refusal(lib, changed);
  });

  it('parses a ring of id:base64 entries and names a bad one by its id only', () => {
    expect(parseKeyRing([`a:${key(1).toString('base64')}`]).map((k) => k.id)).toEqual(['a']);
    expect(() => parseKeyRing([`b:${Buffer.alloc(31).toString('base64')}`])).toThrow(/"b" must be 32 bytes/);
    expect(() => parseKeyRing([key(1).toString('base64')])).toThrow(/id:base64/);
  });
});
