import { RETRY_OFFSETS_S, retryAfter } from '../../src/events/webhook-schedule';

describe('the webhook retry schedule', () => {
  it('is Svix\'s waits, counted from the first attempt: 12 attempts, all within 71 h (the outbox\'s 3 days less its hour)', () => {
    expect(RETRY_OFFSETS_S.length + 1).toBe(12);
    expect(RETRY_OFFSETS_S.slice(0, 7)).toEqual([5, 305, 2105, 9305, 27305, 63305, 99305]);
    expect(RETRY_OFFSETS_S.at(-1)).toBe(67 * 3600 + 35 * 60 + 5);
  });

  it.each([
    [429, '120', { seconds: 120 }],
    [503, ' 0 ', { seconds: 0 }],
    [503, 'Wed, 21 Oct 2015 07:28:00 GMT', { at: '2015-10-21T07:28:00.000Z' }],
    [500, '120', undefined],
    [410, '120', undefined],
    [429, undefined, undefined],
    [429, '-1', undefined],
    [429, '1.5', undefined],
    [429, 'soon', undefined],
    [429, '12345678901', undefined],
  ])('reads Retry-After of a %d, %j, as %j', (status, header, expected) => {
    expect(retryAfter(status, header)).toEqual(expected);
  });
});
