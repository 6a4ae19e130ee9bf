import { ResponseCipher, parseKeyRing } from '../../src/response-cipher';

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
    expect(JSON.parse(sealed.headers!)).toMatchObject({ k: 'k2' });
    expect(cipher.open(ROW, 201, sealed.body, sealed.headers)).toEqual(response);
    // A fresh IV each time: the same response never seals to the same bytes.
    expect(cipher.seal(ROW, response).body).not.toBe(sealed.body);
  });

  it('opens records of an older key of the ring and plain records; refuses a key that left the ring', () => {
    const old = new ResponseCipher([{ id: 'k1', key: key(1) }]).seal(ROW, response);
    const rotated = new ResponseCipher([
      { id: 'k2', key: key(2) },
      { id: 'k1', key: key(1) },
    ]);
    expect(rotated.open(ROW, 201, old.body, old.headers)).toEqual(response);
    expect(rotated.open(ROW, 200, 'plain', null)).toEqual({ status: 200, body: 'plain', contentType: 'application/json; charset=utf-8' });
    expect(() => new ResponseCipher([{ id: 'k2', key: key(2) }]).open(ROW, 201, old.body, old.headers)).toThrow(/sealed with key "k1", which is not in the key ring/);
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
