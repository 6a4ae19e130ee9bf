import { addressKey, isPrivateAddress } from '../../src/addresses/client-address';

describe('addressKey', () => {
  it('keeps an IPv4 address as it is', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7');
  });

  it('counts an IPv6 address by its /64, however it is written', () => {
    const key = '2001:db8:1:2::/64';
    for (const address of ['2001:db8:1:2::1', '2001:0db8:0001:0002:ffff:ffff:ffff:ffff', '2001:DB8:1:2:0:0:0:9', '2001:db8:1:2::a:b', '2001:db8:1:2::1%eth0']) {
      expect(addressKey(address)).toBe(key);
    }
    expect(addressKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('2001:db8::')).toBe('2001:db8:0:0::/64');
  });

  it('takes an IPv4-mapped IPv6 address as its IPv4 address', () => {
    expect(addressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('::ffff:cb00:7107')).toBe('203.0.113.7');
  });

  it('leaves anything else as it is', () => {
    expect(addressKey('unknown')).toBe('unknown');
  });
});

describe('isPrivateAddress', () => {
  it.each(['10.0.0.1', '10.255.255.255', '172.16.0.1', '172.31.255.1', '192.168.1.1', '100.64.0.1', '100.127.255.254', '::ffff:10.1.2.3', 'fd00::1', 'fc12:3456::1'])(
    '%s is private',
    (address) => expect(isPrivateAddress(address)).toBe(true),
  );

  it.each(['127.0.0.1', '::1', '::ffff:127.0.0.1', '8.8.8.8', '172.15.0.1', '172.32.0.1', '192.169.0.1', '100.63.0.1', '100.128.0.1', '2001:db8::1', 'fe80::1', 'unknown'])(
    '%s is not',
    (address) => expect(isPrivateAddress(address)).toBe(false),
  );
});
