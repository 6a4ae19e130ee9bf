import { randomUUID } from 'node:crypto';
import { CHECKS, Outcome } from './checks';
import { Context } from './checks/check';
import { EffectCounter } from './effects';
import { Target, freshUnique, hasPlaceholder, renderBody, send } from './target';

export interface ConformanceOptions {
  target: Target;
  effects: EffectCounter;
  /** Identical requests sent at once by the concurrency check; 20 by default. */
  concurrency?: number;
}

export interface CheckResult {
  id: string;
  expects: string;
  follows: string;
  outcome: Outcome;
  reason: string;
}

export interface ConformanceReport {
  target: { baseUrl: string; method: string; route: string };
  results: CheckResult[];
  passed: number;
  failed: number;
  notApplicable: number;
}

/** Runs every check, one after another, each on its own unique value and key. */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const { target, effects } = options;
  if (!hasPlaceholder(target.bodyTemplate)) throw new Error('the body template needs a {{unique}} placeholder: it is how each check counts its effects');
  renderBody(target.bodyTemplate, freshUnique());
  const ctx: Context = {
    target,
    concurrency: options.concurrency ?? 20,
    fresh: () => {
      const unique = freshUnique();
      return { unique, body: renderBody(target.bodyTemplate, unique), key: `conformance-${randomUUID()}` };
    },
    bodyOf: (unique) => renderBody(target.bodyTemplate, unique),
    send: (o) => send(target, o),
    effects: (unique) => effects.count(unique),
  };
  const results: CheckResult[] = [];
  for (const check of CHECKS) {
    const verdict = await check.run(ctx).catch((error: unknown) => ({ outcome: 'fail' as const, reason: `error: ${describe(error)}` }));
    results.push({ id: check.id, expects: check.expects, follows: check.follows, ...verdict });
  }
  const count = (o: Outcome) => results.filter((r) => r.outcome === o).length;
  return {
    target: { baseUrl: target.baseUrl, method: target.method, route: target.route },
    results,
    passed: count('pass'),
    failed: count('fail'),
    notApplicable: count('n/a'),
  };
}

/** An error and its causes on one line (fetch's own says only "fetch failed"; its cause says why). */
function describe(error: unknown): string {
  if (typeof error !== 'object' || error === null) return String(error);
  const { message, cause } = error as { message?: unknown; cause?: unknown };
  const text = typeof message === 'string' && message ? message : String(error);
  return cause === undefined ? text : `${text} (${describe(cause)})`;
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The report as a markdown table, with the target and the totals. */
export function formatTable(report: ConformanceReport): string {
  const { baseUrl, method, route } = report.target;
  const rows = report.results.map((r) => `| ${r.id} | ${r.outcome} | ${cell(r.expects)} | ${cell(r.reason)} |`);
  return [
    `Idempotency-Key conformance of ${method} ${new URL(route, baseUrl).href}`,
    '',
    '| check | result | expected | seen |',
    '|---|---|---|---|',
    ...rows,
    '',
    `${report.passed} pass, ${report.failed} fail, ${report.notApplicable} not applicable`,
    '',
  ].join('\n');
}
