import type { FetchLike } from '../src';

/** What the fake fetch saw on one call. */
export interface RecordedCall {
  url: string;
  method: string | undefined;
  headers: Record<string, string>;
  body: string | undefined;
}

/**
 * One scripted answer: a Response, an Error to reject with (a network failure),
 * `hang` (never answers, but honours the abort signal like a real fetch), or
 * `hang-deaf` (never answers and ignores the signal).
 */
export type Step = Response | Error | 'hang' | 'hang-deaf';

/** A fetch that answers from a script and records every call. */
export function scriptedFetch(...steps: Step[]): { fetch: jest.Mock<ReturnType<FetchLike>, Parameters<FetchLike>>; calls: RecordedCall[] } {
  const calls: RecordedCall[] = [];
  const fetch = jest.fn<ReturnType<FetchLike>, Parameters<FetchLike>>((url, init) => {
    calls.push({
      url,
      method: init.method,
      headers: { ...(init.headers as Record<string, string>) },
      body: init.body as string | undefined,
    });
    const step = steps.shift();
    if (step === undefined) return Promise.reject(new Error(`unexpected call #${calls.length} to ${url}`));
    if (step instanceof Response) return Promise.resolve(step);
    if (step instanceof Error) return Promise.reject(step);
    return new Promise<Response>((_resolve, reject) => {
      if (step === 'hang') init.signal?.addEventListener('abort', () => reject(init.signal?.reason as Error));
    });
  });
  return { fetch, calls };
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
}

export function problem(status: number, code: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ type: `https://docs.example.com/problems#${code}`, title: 'Problem', status, detail: `detail of ${code}`, code }), {
    status,
    headers: { 'Content-Type': 'application/problem+json', ...headers },
  });
}

/** A connection failure as undici reports it. */
export function connectionRefused(): TypeError {
  return new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:443'), { code: 'ECONNREFUSED' }) });
}
