import { Attempt, History, KeyEnd, checkHistory, digest, keyOf } from '../support/history';

/** The checker catches each broken promise on a small hand-made history, and passes a good one. */
const BODY = digest('{"amount":100}');
const ANSWER = digest('{"id":"pay_1"}');
const attempt = (over: Partial<Attempt>): Attempt => ({ client: 'c', key: 'k', body: BODY, started: 0, ended: 10, status: 201, answer: ANSWER, id: 'pay_1', ...over });
const history = (attempts: Attempt[], end: KeyEnd = { effects: 1, recorded: ['pay_1'] }, lookups: History['lookups'] = []): History => ({
  attempts,
  lookups,
  ends: new Map([[keyOf('c', 'k'), end]]),
});
const check = (h: History) => checkHistory(h, { mayRunOnForMs: 1_000 });

describe('the history checker', () => {
  const good = [
    attempt({}),
    attempt({ started: 1, ended: 5, status: 409, answer: undefined, id: undefined, code: 'idempotency_request_in_progress' }),
    attempt({ started: 20, ended: 25, replayed: true }),
    attempt({ started: 30, ended: 31, status: 422, body: digest('{"amount":200}'), answer: undefined, id: undefined, code: 'idempotency_key_reused' }),
  ];

  it('passes a history that keeps every promise', () => {
    expect(check(history(good, undefined, [{ client: 'c', key: 'k', at: 40, state: 'completed', status: 201 }]))).toEqual([]);
  });

  it.each([
    ['two effects', history(good, { effects: 2, recorded: ['pay_1'] }), /2 effects for one key/],
    ['2xx answers that differ', history([...good, attempt({ started: 40, ended: 41, replayed: true, answer: digest('other') })]), /different bytes/],
    ['two originals', history([attempt({}), attempt({ started: 20, ended: 30, id: 'pay_1' })]), /more than one original/],
    ['an acknowledged effect missing', history([attempt({})], { effects: 1, recorded: [] }), /pay_1 is missing at the end/],
    ['an acknowledged charge never made', history([attempt({})], { effects: 0, recorded: ['pay_1'] }), /missing at the end/],
    ['a 409 with nothing running', history([attempt({}), attempt({ started: 50, ended: 51, status: 409, answer: undefined, id: undefined })]), /a 409 at 50 ms while no other attempt/],
    ['a 422 for the same body', history([attempt({}), attempt({ started: 50, ended: 51, status: 422, code: 'idempotency_key_reused', answer: undefined, id: undefined })]), /a 422 at 50 ms with no other body/],
    ['a lookup that forgot a completed key', history([attempt({})], undefined, [{ client: 'c', key: 'k', at: 20, state: 'unknown' }]), /lookup at 20 ms says unknown after a 2xx/],
    ['a lookup with a status never answered', history([attempt({})], undefined, [{ client: 'c', key: 'k', at: 20, state: 'completed', status: 402 }]), /completed 402, which no attempt/],
  ])('catches %s, and prints the key history', (_, h, why) => {
    const [violation, ...more] = check(h);
    expect(more).toEqual([]);
    expect(violation).toMatch(why);
    expect(violation).toMatch(/client c key k:\n {2}0\.0-10\.0 ms body [0-9a-f]{16}: 201/);
  });

  it('allows a 409 while an unanswered attempt may still be running, not after', () => {
    const lost = attempt({ status: null, answer: undefined, id: undefined, ended: 10 });
    const conflict = (at: number) => attempt({ started: at, ended: at + 1, status: 409, answer: undefined, id: undefined });
    expect(check(history([lost, conflict(500)], { effects: 0, recorded: [] }))).toEqual([]);
    expect(check(history([lost, conflict(2_000)], { effects: 0, recorded: [] }))).toHaveLength(1);
  });
});
