import { Check, Context, Verdict, answer, difference, fail, firstFailed, is2xx, pass } from './check';

const DRAFT = 'IETF draft-ietf-httpapi-idempotency-key-header';

/** Sends a probe's body under `first`, then `second`, and judges the pair as one operation. */
async function sameOperation(ctx: Context, first: (key: string) => string, second: (key: string) => string, label: string): Promise<Verdict> {
  const p = ctx.fresh();
  const a = await ctx.send({ body: p.body, key: first(p.key) });
  if (!is2xx(a)) return firstFailed(a);
  const b = await ctx.send({ body: p.body, key: second(p.key) });
  const effects = await ctx.effects(p.unique);
  if (effects !== 1) return fail(`${label}: ${effects} effects (answers ${a.status}, ${b.status})`);
  const diff = difference(a, b);
  if (diff) return fail(`${label}: one effect, but the retry is not a replay (${diff})`);
  return pass(`${label}: ${a.status}, the retry replayed, 1 effect`);
}

const quoted = (key: string) => `"${key}"`;
const bare = (key: string) => key;

export const keyChecks: Check[] = [
  {
    id: 'missing-key',
    expects: 'no key → 400, no effect',
    follows: `${DRAFT}, Error Scenarios: a missing key on an operation that requires it SHOULD get 400`,
    async run(ctx) {
      const p = ctx.fresh();
      const x = await ctx.send({ body: p.body });
      const effects = await ctx.effects(p.unique);
      if (effects > 0) return fail(`ran without a key: ${answer(x)}, ${effects} effect(s)`);
      if (x.status !== 400) return fail(`answered ${answer(x)}, not 400`);
      return pass('400, no effect');
    },
  },
  {
    id: 'quoted-key',
    expects: '`"k"` accepted; its retry replays',
    follows: `${DRAFT}, Syntax: the key is an RFC 8941 sf-string, sent quoted`,
    run: (ctx) => sameOperation(ctx, quoted, quoted, '"k" twice'),
  },
  {
    id: 'bare-key',
    expects: '`k` accepted; its retry replays',
    follows: "Stripe's API reference, Idempotent requests: clients send the bare key (e.g. a V4 UUID)",
    run: (ctx) => sameOperation(ctx, bare, bare, 'k twice'),
  },
  {
    id: 'quoted-is-bare',
    expects: '`"k"` then `k` → one operation',
    follows: `${DRAFT}, Syntax: the sf-string "k" has the value k; a client that changes style must not pay twice`,
    run: (ctx) => sameOperation(ctx, quoted, bare, '"k" then k'),
  },
];
