import { Exchange } from '../target';
import { Check, Context, Verdict, answer, fail, firstFailed, is2xx, isReplayed, notApplicable, pass, sleep } from './check';

/** The duplicate goes this long after the original, so the original is the one that claims the key. */
const DUPLICATE_AFTER_MS = 50;
/** The original must still be running this long after the duplicate was sent for "in flight" to be certain. */
const IN_FLIGHT_MARGIN_MS = 100;

const RETRY_AFTER = /^\s*(\d+\s*|[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT\s*)$/;

async function inFlight(ctx: Context): Promise<Verdict> {
  const p = ctx.fresh();
  const [first, duplicate] = await Promise.all([
    ctx.send({ body: p.body, key: p.key }),
    sleep(DUPLICATE_AFTER_MS).then(() => ctx.send({ body: p.body, key: p.key })),
  ]);
  const effects = await ctx.effects(p.unique);
  const conflict = [duplicate, first].find((x) => x.status === 409);
  if (effects > 1) return fail(`both ran: ${effects} effects (answers ${first.status}, ${duplicate.status})`);
  if (conflict) {
    const retryAfter = conflict.headers.get('retry-after');
    if (retryAfter === null) return fail('409, without Retry-After');
    if (!RETRY_AFTER.test(retryAfter)) return fail(`409 with Retry-After: ${retryAfter}, neither seconds nor an HTTP date`);
    return pass(`409 with Retry-After: ${retryAfter.trim()} while the original ran (${Math.round(first.answered - first.sent)} ms)`);
  }
  if (!is2xx(first)) return firstFailed(first);
  const overlap = first.answered - duplicate.sent;
  if (overlap < IN_FLIGHT_MARGIN_MS) {
    return notApplicable(
      `not observed: the original took ${Math.round(first.answered - first.sent)} ms and the duplicate got ${duplicate.status}; make the route slower (~500 ms) to observe it`,
    );
  }
  return fail(`the duplicate, sent while the original ran (${Math.round(overlap)} ms before it ended), got ${answer(duplicate)}${isReplayed(duplicate) ? ' (a replay: it waited)' : ''}`);
}

function histogram(xs: Exchange[]): string {
  const counts = new Map<number, number>();
  for (const x of xs) counts.set(x.status, (counts.get(x.status) ?? 0) + 1);
  return [...counts].sort((a, b) => a[0] - b[0]).map(([status, n]) => `${n} × ${status}`).join(', ');
}

async function concurrent(ctx: Context): Promise<Verdict> {
  const p = ctx.fresh();
  const all = await Promise.all(Array.from({ length: ctx.concurrency }, () => ctx.send({ body: p.body, key: p.key })));
  const effects = await ctx.effects(p.unique);
  const seen = `${ctx.concurrency} at once: ${histogram(all)}`;
  if (effects !== 1) return fail(`${seen}; ${effects} effects`);
  const bodies = new Set(all.filter(is2xx).map((x) => x.body));
  if (bodies.size > 1) return fail(`${seen}; ${bodies.size} different successful bodies`);
  const odd = all.find((x) => !is2xx(x) && x.status !== 409);
  if (odd) return fail(`${seen}; one answered ${answer(odd)}`);
  return pass(`${seen}; 1 effect`);
}

async function scope(ctx: Context): Promise<Verdict> {
  if (ctx.target.clients.length < 2) return notApplicable('needs two clients (--client twice)');
  const p = ctx.fresh();
  const a = await ctx.send({ body: p.body, key: p.key, client: 0 });
  if (!is2xx(a)) return firstFailed(a);
  const b = await ctx.send({ body: p.body, key: p.key, client: 1 });
  const effects = await ctx.effects(p.unique);
  if (!is2xx(b)) return fail(`the second client was refused: ${answer(b)}`);
  if (isReplayed(b) || effects < 2) return fail(`the second client got the first client's answer (${isReplayed(b) ? 'replayed' : 'same operation'}), ${effects} effect(s)`);
  if (effects > 2) return fail(`${effects} effects from two clients`);
  return pass('two clients, one key: two operations, neither a replay');
}

export const concurrencyChecks: Check[] = [
  {
    id: 'in-flight',
    expects: 'a duplicate while the original runs → 409 with Retry-After, one effect',
    follows: 'IETF draft-ietf-httpapi-idempotency-key-header, Error Scenarios: a request still in progress SHOULD get 409; RFC 9110 §10.2.3 Retry-After says when to retry',
    run: inFlight,
  },
  {
    id: 'concurrent',
    expects: 'N identical requests at once → one effect; the others replay or get 409',
    follows: "Stripe's API reference, Idempotent requests: one operation per key; the IETF draft's purpose (fault-tolerant POST)",
    run: concurrent,
  },
  {
    id: 'scope',
    expects: 'two clients, one key → two operations',
    follows: "Stripe's API reference, Idempotent requests: keys are scoped per account",
    run: scope,
  },
];
