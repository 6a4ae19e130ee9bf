import { freshUnique } from '../target';
import { Check, answer, difference, fail, firstFailed, is2xx, isReplayed, pass } from './check';

export const replayChecks: Check[] = [
  {
    id: 'replay-fidelity',
    expects: 'same key, same body → the same status, body bytes, content type and location; one effect',
    follows: "Stripe's API reference, Idempotent requests: a retry returns the same result, status code included",
    async run(ctx) {
      const p = ctx.fresh();
      const a = await ctx.send({ body: p.body, key: p.key });
      if (!is2xx(a)) return firstFailed(a);
      const b = await ctx.send({ body: p.body, key: p.key });
      const effects = await ctx.effects(p.unique);
      if (effects !== 1) return fail(`${effects} effects from one key`);
      const diff = difference(a, b);
      if (diff) return fail(`the replay differs: ${diff}`);
      return pass(`${a.status} twice, identical, 1 effect`);
    },
  },
  {
    id: 'replayed-header',
    expects: 'the replay carries `Idempotent-Replayed: true`, the original does not',
    follows: "Stripe's API reference, Idempotent requests: replayed responses carry Idempotent-Replayed: true",
    async run(ctx) {
      const p = ctx.fresh();
      const a = await ctx.send({ body: p.body, key: p.key });
      if (!is2xx(a)) return firstFailed(a);
      const b = await ctx.send({ body: p.body, key: p.key });
      if (isReplayed(a)) return fail('the original response says Idempotent-Replayed: true');
      if (!isReplayed(b)) return fail(`the replay has Idempotent-Replayed: ${b.headers.get('idempotent-replayed') ?? '(none)'}`);
      return pass('absent on the original, true on the replay');
    },
  },
  {
    id: 'other-body',
    expects: 'same key, another body → 422, no effect of it',
    follows: 'IETF draft-ietf-httpapi-idempotency-key-header, Error Scenarios: a key reused with another payload SHOULD get 422',
    async run(ctx) {
      const p = ctx.fresh();
      const a = await ctx.send({ body: p.body, key: p.key });
      if (!is2xx(a)) return firstFailed(a);
      const other = freshUnique();
      const b = await ctx.send({ body: ctx.bodyOf(other), key: p.key });
      const [first, second] = await Promise.all([ctx.effects(p.unique), ctx.effects(other)]);
      if (second > 0) return fail(`the other body ran: ${answer(b)}, ${second} effect(s)`);
      if (first !== 1) return fail(`${first} effects of the first body`);
      if (b.status !== 422) return fail(`answered ${answer(b)}, not 422${isReplayed(b) ? ' (the first body\'s replay)' : ''}`);
      return pass('422, the other body took no effect');
    },
  },
];
