import { createHash } from 'node:crypto';

/**
 * The history checker: what a run sent and was answered (every attempt, every
 * outcome lookup) and what it left behind (effects at the card network,
 * records in the database), checked per key against what exactly-once
 * promises. The race suites and the fleet soak record their histories and fail
 * on any violation; a violation prints the key's whole history.
 *
 * Times are one clock of the recording process (performance.now(), in ms).
 */
export interface Attempt {
  client: string;
  key: string;
  /** Digest of the request body (digest()). */
  body: string;
  started: number;
  ended: number;
  /** The HTTP status; null when no answer came (a connection error, a timeout, a killed instance). */
  status: number | null;
  /** Digest of the answer's bytes. */
  answer?: string;
  /** The problem's `code`, for an error. */
  code?: string;
  /** The id of the resource a 2xx answer names. */
  id?: string;
  replayed?: boolean;
}

export interface Lookup {
  client: string;
  key: string;
  /** When the answer came. */
  at: number;
  state: 'unknown' | 'in_progress' | 'completed';
  status?: number;
}

/** What a key left behind at the end of the run. */
export interface KeyEnd {
  /** Effects counted at the far side: charges at the card network, or rows for a route whose effect is a row. */
  effects: number;
  /** Ids of the resources the database holds for this key's operation. */
  recorded: string[];
}

export interface History {
  attempts: Attempt[];
  lookups?: Lookup[];
  /** Per `keyOf(client, key)`. */
  ends: Map<string, KeyEnd>;
}

export interface CheckOptions {
  /**
   * How long an attempt that got no answer, or a 5xx (its operation kept for a
   * resume), may still be running on the server: a 409 within that time is
   * allowed. The lease plus the recovery job's interval is enough.
   */
  mayRunOnForMs: number;
}

export const keyOf = (client: string, key: string): string => `${client}\u0000${key}`;

export const digest = (text: string | Buffer): string => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** Every violation in the history, each with its key's history; none for a history that keeps the promise. */
export function checkHistory(history: History, options: CheckOptions): string[] {
  const byKey = new Map<string, { attempts: Attempt[]; lookups: Lookup[] }>();
  const entry = (k: string) => byKey.get(k) ?? byKey.set(k, { attempts: [], lookups: [] }).get(k)!;
  for (const a of history.attempts) entry(keyOf(a.client, a.key)).attempts.push(a);
  for (const l of history.lookups ?? []) entry(keyOf(l.client, l.key)).lookups.push(l);
  const violations: string[] = [];
  for (const [k, { attempts, lookups }] of byKey) {
    const found = checkKey(attempts, lookups, history.ends.get(k), options);
    if (found.length) violations.push(`${found.join('; ')}\n${describeKey(k, attempts, lookups, history.ends.get(k))}`);
  }
  return violations;
}

function checkKey(attempts: Attempt[], lookups: Lookup[], end: KeyEnd | undefined, { mayRunOnForMs }: CheckOptions): string[] {
  const found: string[] = [];
  const ok = attempts.filter((a) => a.status !== null && a.status >= 200 && a.status < 300);
  if (end && end.effects > 1) found.push(`${end.effects} effects for one key`);
  if (new Set(ok.map((a) => a.answer)).size > 1) found.push('2xx answers with different bytes');
  if (ok.filter((a) => !a.replayed).length > 1) found.push('more than one original (not replayed) 2xx answer');
  for (const a of ok) {
    if (!end || end.effects < 1 || (a.id !== undefined && !end.recorded.includes(a.id))) found.push(`the acknowledged ${a.id ?? 'effect'} is missing at the end`);
  }
  for (const a of attempts) {
    if (a.status === 409 && !attempts.some((b) => b !== a && b.started < a.ended && runsUntil(b, mayRunOnForMs) > a.started)) {
      found.push(`a 409 at ${a.started.toFixed(0)} ms while no other attempt could be running`);
    }
    if (a.status === 422 && a.code === 'idempotency_key_reused' && !attempts.some((b) => b.body !== a.body && b.started < a.ended)) {
      found.push(`a 422 at ${a.started.toFixed(0)} ms with no other body sent under the key`);
    }
  }
  const firstOk = Math.min(...ok.map((a) => a.ended));
  for (const l of lookups) {
    if (l.at > firstOk && l.state !== 'completed') found.push(`the lookup at ${l.at.toFixed(0)} ms says ${l.state} after a 2xx answer`);
    if (l.state === 'completed' && !attempts.some((a) => a.status === l.status)) found.push(`the lookup says completed ${l.status}, which no attempt was answered`);
  }
  return found;
}

/** When an attempt's work may last until: its answer, or (no answer, or a 5xx that keeps the operation) a while after. */
function runsUntil(a: Attempt, mayRunOnForMs: number): number {
  return a.status === null || a.status >= 500 ? a.ended + mayRunOnForMs : a.ended;
}

function describeKey(k: string, attempts: Attempt[], lookups: Lookup[], end: KeyEnd | undefined): string {
  const [client, key] = k.split('\u0000');
  const events = [
    ...attempts.map((a) => ({
      t: a.started,
      line: `  ${a.started.toFixed(1)}-${a.ended.toFixed(1)} ms body ${a.body}: ${a.status ?? 'no answer'}${a.replayed ? ' (replayed)' : ''}${a.code ? ` ${a.code}` : ''}${a.answer ? ` answer ${a.answer}` : ''}${a.id ? ` id ${a.id}` : ''}`,
    })),
    ...lookups.map((l) => ({ t: l.at, line: `  ${l.at.toFixed(1)} ms lookup: ${l.state}${l.status ? ` ${l.status}` : ''}` })),
  ].sort((x, y) => x.t - y.t);
  const ending = end ? `  end: ${end.effects} effect(s), recorded ${JSON.stringify(end.recorded)}` : '  end: not counted';
  return `client ${client} key ${key}:\n${events.map((e) => e.line).join('\n')}\n${ending}`;
}
