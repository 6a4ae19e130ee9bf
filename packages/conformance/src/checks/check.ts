import { Exchange, SendOptions, Target } from '../target';

export type Outcome = 'pass' | 'fail' | 'n/a';

export interface Verdict {
  outcome: Outcome;
  /** One line: what was seen. */
  reason: string;
}

/** What a check works with: fresh probes, the server and the effects counter. */
export interface Context {
  target: Target;
  /** How many identical requests the concurrency check sends at once. */
  concurrency: number;
  /** A fresh unique value, the body it fills in and a fresh key (bare). */
  fresh(): Probe;
  /** The body of another unique value (another payload for the same key). */
  bodyOf(unique: string): string;
  send(options: SendOptions): Promise<Exchange>;
  effects(unique: string): Promise<number>;
}

export interface Probe {
  unique: string;
  body: string;
  key: string;
}

export interface Check {
  id: string;
  /** What the server is expected to do. */
  expects: string;
  /** The text the expectation follows. */
  follows: string;
  run(ctx: Context): Promise<Verdict>;
}

export const pass = (reason: string): Verdict => ({ outcome: 'pass', reason });
export const fail = (reason: string): Verdict => ({ outcome: 'fail', reason });
export const notApplicable = (reason: string): Verdict => ({ outcome: 'n/a', reason });

export const is2xx = (x: Exchange) => x.status >= 200 && x.status < 300;
export const isReplayed = (x: Exchange) => x.headers.get('idempotent-replayed')?.trim().toLowerCase() === 'true';

/** A status with the start of its body, for a reason line. */
export function answer(x: Exchange): string {
  const body = x.body.replace(/\s+/g, ' ');
  return body ? `${x.status} ${body.length > 80 ? `${body.slice(0, 80)}…` : body}` : String(x.status);
}

/** The first way a replay differs from the original (status, body bytes, content type, location), if any. */
export function difference(original: Exchange, replay: Exchange): string | undefined {
  if (original.status !== replay.status) return `status ${original.status} then ${replay.status}`;
  if (original.body !== replay.body) return 'another body';
  for (const name of ['content-type', 'location']) {
    const a = original.headers.get(name);
    const b = replay.headers.get(name);
    if (a !== b) return `${name} ${a ?? '(none)'} then ${b ?? '(none)'}`;
  }
  return undefined;
}

/** The verdict when a check's first request did not succeed: nothing else can be judged. */
export const firstFailed = (x: Exchange): Verdict =>
  fail(`the first request answered ${answer(x)}: check --body and --client`);

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
