import { randomBytes, randomUUID } from 'node:crypto';
import type { AppConfig } from '../../src/config/config';
import { isPublicAddress } from '../../src/addresses/public-address';
import { pinnedLookup } from '../../src/events/webhook-request';
import { EndpointSecrets } from '../../src/webhook-endpoints/endpoint-secrets';

describe('isPublicAddress', () => {
  it.each([
    '0.0.0.0',
    '10.0.0.1',
    '100.64.0.1',
    '127.0.0.1',
    '127.255.255.254',
    '169.254.169.254',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::ffff:a9fe:a9fe',
    '64:ff9b::7f00:1',
    '2002:7f00:1::',
    // IPv4-compatible and translated forms, the 6to4 relay anycast, documentation and segment routing prefixes.
    '::7f00:1',
    '::ffff:0:7f00:1',
    '192.88.99.1',
    '3fff::1',
    '5f00::1',
    '2001:db8::1',
    '2001::1',
    'localhost',
    'not an address',
  ])('refuses %s', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '::ffff:808:808'])('accepts %s', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });
});

describe('pinnedLookup', () => {
  it('answers every checked address when Node asks for all (it tries them in turn), the first otherwise', () => {
    const checked = [
      { address: '2606:4700:4700::1111', family: 6 },
      { address: '1.1.1.1', family: 4 },
    ];
    const lookup = pinnedLookup(checked);
    let all: unknown;
    lookup('example.com', { all: true }, (_error, addresses) => (all = addresses));
    expect(all).toEqual(checked);
    let one: unknown;
    lookup('example.com', {}, (_error, address, family) => (one = { address, family }));
    expect(one).toEqual(checked[0]);
  });
});

describe('EndpointSecrets', () => {
  const ring = (...ids: string[]) => ids.map((id) => `${id}:${randomBytes(32).toString('base64')}`);
  const secrets = (keys: string[]) => new EndpointSecrets({ idempotency: { postgres: { encryptionKeys: keys } } } as unknown as AppConfig);

  it('seals under the newest key, opens under any key of the ring, and only for its own endpoint', () => {
    const [k1, k2] = ring('k1', 'k2');
    const id = randomUUID();
    const secret = EndpointSecrets.generate();
    const old = secrets([k1]).seal(id, secret);
    expect(old).toMatch(/^sealed:v1:k1:/);
    expect(old).not.toContain(secret.slice(6));
    const rotated = secrets([k2, k1]);
    expect(rotated.open(id, old)).toBe(secret);
    expect(rotated.seal(id, secret)).toMatch(/^sealed:v1:k2:/);
    expect(() => rotated.open(randomUUID(), old)).toThrow();
    expect(() => secrets([k2]).open(id, old)).toThrow(/not in the key ring/);
  });

  it('without a ring keeps the secret as it is; with one, refuses a secret in clear', () => {
    const id = randomUUID();
    const secret = EndpointSecrets.generate();
    expect(secrets([]).seal(id, secret)).toBe(secret);
    expect(secrets([]).open(id, secret)).toBe(secret);
    expect(() => secrets(ring('k1')).open(id, secret)).toThrow(/stored in clear/);
  });
});
