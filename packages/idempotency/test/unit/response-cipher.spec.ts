import { createCipheriv, randomBytes } from 'node:crypto';
import { parseKeyRing } from 'safe-retries';
import { ResponseCipher, SealedResponseError } from '../../src/contract/response-cipher';

const key = (byte: number) => Buffer.alloc(32, byte);
const ROW = '0b9d3a3e-7d4f-4f7e-9d2a-6f1e8b0c2a11';
const response = { status: 201, body: '{"id":"pay_1","amount":1250}', contentType: 'application/json; charset=utf-8', location: '/payments/pay_1' };

describe('ResponseCipher', () => {
  it('without keys stores the body as sent and only non-default headers', () => {
    const plain = new ResponseCipher();
    expect(plain.seal(ROW, { ...response, location: undefined })).toEqual({ body: response.body, headers: null });
    const sealed = plain.seal(ROW, response);
    expect(sealed.body).toBe(response.body);
    expect(plain.open(ROW, 201, sealed.body, sealed.headers)).toEqual(response);
  });

  it('seals body and headers under the newest key; opens them byte for byte', () => {
    const cipher = new ResponseCipher([
      { id: 'k2', key: key(2) },
      { id: 'k1', key: key(1) },
    ]);
    const sealed = cipher.seal(ROW, response);
    expect(sealed.body).not.toContain('pay_1');
    expect(sealed.headers).not.toContain('/payments');
    expect(JSON.parse(sealed.headers!)).toMatchObject({ v: 2, k: 'k2' });
    expect(cipher.open(ROW, 201, sealed.body, sealed.headers)).toEqual(response);
    // A fresh IV each time: the same response never seals to the same bytes.
    expect(cipher.seal(ROW, response).body).not.toBe(sealed.body);
  });

  it('opens records of an older key of the ring; refuses a key that left the ring, naming both keys', () => {
    const old = new ResponseCipher([{ id: 'k1', key: key(1) }]).seal(ROW, response);
    const rotated = new ResponseCipher([
      { id: 'k2', key: key(2) },
      { id: 'k1', key: key(1) },
    ]);
    expect(rotated.open(ROW, 201, old.body, old.headers)).toEqual(response);
    expect(() => new ResponseCipher([{ id: 'k2', key: key(2) }]).open(ROW, 201, old.body, old.headers, 'order-7')).toThrow(
      /the stored response of idempotency key "order-7" is sealed with encryption key "k1", which is not in the key ring/,
    );
  });

  describe('binds the status, the headers and the sealed marker (authenticated data)', () => {
    const cipher = new ResponseCipher([{ id: 'k1', key: key(1) }]);
    const refused = /the stored response of idempotency key "order-7" does not open with encryption key "k1": its status, headers or body were changed/;
    const declined = { ...response, status: 402, body: '{"error":"card_declined"}' };

    it('a stored 402 edited into a 201 is refused', () => {
      const sealed = cipher.seal(ROW, declined);
      expect(cipher.open(ROW, 402, sealed.body, sealed.headers, 'order-7')).toEqual(declined);
      expect(() => cipher.open(ROW, 201, sealed.body, sealed.headers, 'order-7')).toThrow(refused);
      expect(() => cipher.open(ROW, 201, sealed.body, sealed.headers, 'order-7')).toThrow(SealedResponseError);
    });

    it("another row's headers, or none, under this body are refused", () => {
      const sealed = cipher.seal(ROW, response);
      const other = cipher.seal(ROW, { ...response, location: '/payments/pay_2' });
      expect(() => cipher.open(ROW, 201, sealed.body, other.headers, 'order-7')).toThrow(refused);
      expect(() => cipher.open(ROW, 201, sealed.body, JSON.stringify({ v: 2, k: 'k1', h: null }), 'order-7')).toThrow(refused);
    });

    it('a whole row moved to another key is refused', () => {
      const sealed = cipher.seal(ROW, response);
      expect(() => cipher.open('00000000-0000-0000-0000-000000000000', 201, sealed.body, sealed.headers, 'order-7')).toThrow(refused);
    });

    it('the marker dropped (the row made to look sealed before binding, or in clear) is refused', () => {
      const sealed = cipher.seal(ROW, response);
      const { h } = JSON.parse(sealed.headers!) as { h: string };
      expect(() => cipher.open(ROW, 201, sealed.body, JSON.stringify({ k: 'k1', h }), 'order-7')).toThrow(refused);
      expect(() => cipher.open(ROW, 201, '{"id":"pay_forged"}', null, 'order-7')).toThrow(
        /the stored response of idempotency key "order-7" is stored in clear, and stored responses are sealed \(encryption key "k1"\): refused/,
      );
      expect(() => cipher.open(ROW, 201, '{"id":"pay_forged"}', '{"ct":"text/plain"}', 'order-7')).toThrow(/is stored in clear/);
      expect(() => cipher.open(ROW, 201, sealed.body, 'not json', 'order-7')).toThrow(/headers column that is not the module's JSON/);
    });

    it('a row sealed before the binding (bound to its row alone) still opens', () => {
      const v1 = (text: string) => {
        const iv = randomBytes(12);
        const c = createCipheriv('aes-256-gcm', key(1), iv);
        c.setAAD(Buffer.from(ROW));
        const sealed = Buffer.concat([c.update(text, 'utf8'), c.final()]);
        return Buffer.concat([iv, c.getAuthTag(), sealed]).toString('base64');
      };
      const headers = JSON.stringify({ k: 'k1', h: v1(JSON.stringify({ ct: response.contentType, loc: response.location })) });
      expect(cipher.open(ROW, 201, v1(response.body), headers)).toEqual(response);
    });
  });

  it('without keys opens rows in clear', () => {
    expect(new ResponseCipher().open(ROW, 200, 'plain', null)).toEqual({ status: 200, body: 'plain', contentType: 'application/json; charset=utf-8' });
  });

  it("binds a sealed response to its row: another row's id, or a changed byte, does not open", () => {
    const cipher = new ResponseCipher([{ id: 'k1', key: key(1) }]);
    const sealed = cipher.seal(ROW, response);
    expect(() => cipher.open('00000000-0000-0000-0000-000000000000', 201, sealed.body, sealed.headers)).toThrow();
    const bytes = Buffer.from(sealed.body, 'base64');
    bytes[bytes.length - 1] ^= 1;
    expect(() => cipher.open(ROW, 201, bytes.toString('base64'), sealed.headers)).toThrow();
  });

  it('parses a ring of id:base64 entries and names a bad one by its id only', () => {
    expect(parseKeyRing([`a:${key(1).toString('base64')}`]).map((k) => k.id)).toEqual(['a']);
    expect(() => parseKeyRing([`b:${Buffer.alloc(31).toString('base64')}`])).toThrow(/"b" must be 32 bytes/);
    expect(() => parseKeyRing([key(1).toString('base64')])).toThrow(/id:base64/);
  });
});
