import { IdempotentClient, IdempotentClientOptions, NetworkError, ProblemError, RetryEvent } from '../src';
import { connectionRefused, json, problem, scriptedFetch, Step } from './fake-fetch';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A client over a scripted fetch; zero jitter, so waits are 0 ms unless a test says otherwise. */
function setup(steps: Step[], options: Partial<IdempotentClientOptions> = {}) {
  const { fetch, calls } = scriptedFetch(...steps);
  const retries: RetryEvent[] = [];
  const client = new IdempotentClient({
    baseUrl: 'https://api.example.com/v1/',
    apiKey: 'sk_test_123',
    random: () => 0,
    fetch,
    onRetry: (event) => retries.push(event),
    ...options,
  });
  return { client, fetch, calls, retries };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

function useFakeTimers(): void {
  // Real microtask machinery: Response.text() relies on it.
  jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
}

afterEach(() => {
  jest.useRealTimers();
});

describe('IdempotentClient.post', () => {
  it('sends the body as JSON with bearer auth and a UUID Idempotency-Key, under the base path', async () => {
    const { client, calls } = setup([json(201, { id: 'ord_1' })]);

    const result = await client.post('/orders', { currency: 'EUR', items: [] });

    expect(result).toMatchObject({ status: 201, body: { id: 'ord_1' }, replayed: false, attempts: 1 });
    expect(calls).toHaveLength(1);
    expect(calls[0].url).toBe('https://api.example.com/v1/orders');
    expect(calls[0].method).toBe('POST');
    expect(calls[0].body).toBe('{"currency":"EUR","items":[]}');
    expect(calls[0].headers).toEqual({
      Authorization: 'Bearer sk_test_123',
      Accept: 'application/json',
      'Content-Type': 'application/json',
      'Idempotency-Key': expect.stringMatching(UUID),
    });
  });

  it('sends the same key and the same body bytes on every attempt', async () => {
    const { client, calls, retries } = setup([
      problem(503, 'service_unavailable'),
      problem(503, 'service_unavailable'),
      problem(503, 'service_unavailable'),
      json(201, { id: 'pay_1' }),
    ]);

    const result = await client.post('/payments', { amount: 1250, currency: 'EUR', source: 'tok_visa' });

    expect(result.attempts).toBe(4);
    expect(calls).toHaveLength(4);
    const keys = new Set(calls.map((c) => c.headers['Idempotency-Key']));
    const bodies = new Set(calls.map((c) => c.body));
    expect(keys.size).toBe(1);
    expect(bodies).toEqual(new Set(['{"amount":1250,"currency":"EUR","source":"tok_visa"}']));
    expect(retries.map((r) => [r.attempt, r.reason, r.status])).toEqual([
      [1, 'status', 503],
      [2, 'status', 503],
      [3, 'status', 503],
    ]);
  });

  it('uses the caller key verbatim, and a new random key per operation otherwise', async () => {
    const { client, calls } = setup([json(201, {}), json(201, {}), json(201, {})]);

    await client.post('/payments', {}, { idempotencyKey: 'order-42-payment' });
    await client.post('/payments', {});
    await client.post('/payments', {});

    expect(calls[0].headers['Idempotency-Key']).toBe('order-42-payment');
    expect(calls[1].headers['Idempotency-Key']).not.toBe(calls[2].headers['Idempotency-Key']);
  });

  it('retries a 409 (request in progress) and succeeds on the second attempt', async () => {
    const { client, calls } = setup([problem(409, 'idempotency_request_in_progress'), json(201, { id: 'pay_1', status: 'succeeded' })]);

    const result = await client.post('/payments', { amount: 100 });

    expect(result).toMatchObject({ status: 201, body: { id: 'pay_1', status: 'succeeded' }, attempts: 2 });
    expect(calls).toHaveLength(2);
  });

  it('reports a replayed response', async () => {
    const { client } = setup([json(201, { id: 'pay_1' }, { 'Idempotent-Replayed': 'true' })]);

    await expect(client.post('/payments', {})).resolves.toMatchObject({ replayed: true, attempts: 1 });
  });

  it('does not retry a 422: one call, a ProblemError with the problem fields', async () => {
    const { client, calls, retries } = setup([problem(422, 'idempotency_key_reused', { 'X-Request-Id': 'req_1' })]);

    const error = await rejection(client.post('/payments', {}, { idempotencyKey: 'k1' }));

    expect(calls).toHaveLength(1);
    expect(retries).toHaveLength(0);
    expect(error).toBeInstanceOf(ProblemError);
    expect(error).toMatchObject({
      name: 'ProblemError',
      status: 422,
      code: 'idempotency_key_reused',
      type: 'https://docs.example.com/problems#idempotency_key_reused',
      title: 'Problem',
      detail: 'detail of idempotency_key_reused',
      attempts: 1,
      idempotencyKey: 'k1',
      body: expect.objectContaining({ code: 'idempotency_key_reused' }),
    });
    expect((error as ProblemError).headers.get('X-Request-Id')).toBe('req_1');
  });

  it.each([400, 401, 402, 403, 404, 500])('does not retry a %i', async (status) => {
    const { client, calls } = setup([problem(status, `code_${status}`)]);

    const error = await rejection(client.post('/payments', {}));

    expect(calls).toHaveLength(1);
    expect(error).toMatchObject({ status, code: `code_${status}`, attempts: 1 });
  });

  it('turns a non-JSON error body into a ProblemError with code unknown', async () => {
    const html = '<html><body>Bad Gateway</body></html>';
    const { client } = setup([new Response(html, { status: 500, statusText: 'Internal Server Error', headers: { 'Content-Type': 'text/html' } })]);

    const error = await rejection(client.post('/payments', {}));

    expect(error).toBeInstanceOf(ProblemError);
    expect(error).toMatchObject({ status: 500, code: 'unknown', title: 'Internal Server Error', type: 'about:blank', body: html });
  });

  it('throws the last ProblemError when a retryable status outlasts maxAttempts', async () => {
    const { client, calls } = setup(Array.from({ length: 5 }, () => problem(503, 'service_unavailable')));

    const error = await rejection(client.post('/payments', {}));

    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(5);
    expect(error).toBeInstanceOf(ProblemError);
    expect(error).toMatchObject({ status: 503, code: 'service_unavailable', attempts: 5 });
  });

  it('after giving up, asks once where the operation stands and puts the answer on the error', async () => {
    const outcome = { key: 'k-out', state: 'completed', status: 201, expires_at: '2026-12-03T05:00:00.000Z' };
    const { client, calls } = setup([problem(503, 'card_network_unavailable'), problem(503, 'card_network_unavailable'), json(200, outcome)], {
      maxAttempts: 2,
    });

    const error = (await rejection(client.post('/payments', {}, { idempotencyKey: 'k-out' }))) as ProblemError;

    expect(calls.map((c) => `${c.method} ${c.url}`)).toEqual([
      'POST https://api.example.com/v1/payments',
      'POST https://api.example.com/v1/payments',
      'GET https://api.example.com/v1/idempotency-keys/k-out',
    ]);
    expect(error.outcome).toEqual(outcome);
  });

  it('tries the lookup once, with no retry; a failed lookup leaves outcome undefined', async () => {
    const { client, calls } = setup([connectionRefused(), connectionRefused()], { maxAttempts: 1 });

    const error = (await rejection(client.post('/payments', {}, { idempotencyKey: 'k "quoted"' }))) as NetworkError;

    expect(calls.map((c) => c.url)).toEqual(['https://api.example.com/v1/payments', 'https://api.example.com/v1/idempotency-keys/k%20%22quoted%22']);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error.outcome).toBeUndefined();
  });

  it('does not look up a refused request (a status that is not retried), nor when told not to', async () => {
    const refused = setup([problem(422, 'idempotency_key_reused')]);
    expect(await rejection(refused.client.post('/payments', {}))).toMatchObject({ status: 422 });
    expect(refused.calls).toHaveLength(1);

    const off = setup([problem(503, 'service_unavailable')], { maxAttempts: 1, lookUpOutcome: false });
    expect(await rejection(off.client.post('/payments', {}))).toMatchObject({ status: 503, outcome: undefined });
    expect(off.calls).toHaveLength(1);
  });

  it('retries a network error and then succeeds', async () => {
    const { client, calls, retries } = setup([connectionRefused(), json(201, { id: 'pay_1' })]);

    const result = await client.post('/payments', {});

    expect(result.attempts).toBe(2);
    expect(calls[0].headers['Idempotency-Key']).toBe(calls[1].headers['Idempotency-Key']);
    expect(retries).toEqual([{ attempt: 1, delayMs: 0, reason: 'network', error: expect.any(TypeError) }]);
  });

  it('throws a NetworkError with the last cause after maxAttempts network failures', async () => {
    const last = connectionRefused();
    const { client, calls } = setup([connectionRefused(), connectionRefused(), last], { maxAttempts: 3 });

    const error = await rejection(client.post('/payments', {}, { idempotencyKey: 'k2' }));

    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(3);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ name: 'NetworkError', reason: 'network', attempts: 3, idempotencyKey: 'k2' });
    expect((error as NetworkError).cause).toBe(last);
    expect((error as NetworkError).message).toContain('ECONNREFUSED');
  });

  it('retries an attempt that exceeds timeoutMs', async () => {
    const { client, calls, retries } = setup(['hang', json(201, { id: 'pay_1' })], { timeoutMs: 20 });

    const result = await client.post('/payments', {});

    expect(result.attempts).toBe(2);
    expect(calls).toHaveLength(2);
    expect(retries).toEqual([{ attempt: 1, delayMs: 0, reason: 'timeout', error: expect.objectContaining({ name: 'TimeoutError' }) }]);
  });

  it('times out even a fetch that ignores its signal, and gives up with reason timeout', async () => {
    const { client, calls } = setup(['hang-deaf', 'hang-deaf', 'hang-deaf'], { timeoutMs: 20, maxAttempts: 2 });

    const error = await rejection(client.post('/payments', {}));

    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(2);
    expect(error).toBeInstanceOf(NetworkError);
    expect(error).toMatchObject({ reason: 'timeout', attempts: 2 });
  });

  it('waits exactly what Retry-After says, even beyond maxDelayMs', async () => {
    useFakeTimers();
    const { client, calls, retries } = setup([problem(429, 'too_many_requests', { 'Retry-After': '10' }), json(201, { id: 'pay_1' })], {
      maxDelayMs: 1000,
    });

    const result = client.post('/payments', {});
    await jest.advanceTimersByTimeAsync(9_999);
    expect(calls).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);

    await expect(result).resolves.toMatchObject({ status: 201, attempts: 2 });
    expect(retries).toEqual([{ attempt: 1, delayMs: 10_000, reason: 'status', status: 429 }]);
  });

  it('honours a Retry-After HTTP date', async () => {
    useFakeTimers();
    jest.setSystemTime(Date.UTC(2026, 0, 15, 12, 0, 0));
    const { client, retries } = setup([problem(503, 'service_unavailable', { 'Retry-After': 'Thu, 15 Jan 2026 12:00:03 GMT' }), json(201, {})]);

    const result = client.post('/payments', {});
    await jest.advanceTimersByTimeAsync(3_000);

    await expect(result).resolves.toMatchObject({ attempts: 2 });
    expect(retries[0].delayMs).toBe(3_000);
  });

  it('caps Retry-After at maxRetryAfterMs (60 s by default)', async () => {
    const { client, retries } = setup([problem(503, 'service_unavailable', { 'Retry-After': '3600' })], {
      onRetry: (event) => {
        retries.push(event);
        throw new Error('stop');
      },
    });

    await expect(client.post('/payments', {})).rejects.toThrow('stop');
    expect(retries[0].delayMs).toBe(60_000);
  });

  it('falls back to jittered backoff when Retry-After is absent or malformed', async () => {
    const { client, retries } = setup(
      [problem(503, 'x'), problem(503, 'x', { 'Retry-After': 'soon' }), problem(503, 'x'), json(201, {})],
      { random: () => 0.5, baseDelayMs: 4, maxDelayMs: 10 },
    );

    await client.post('/payments', {});

    // floor(0.5 * (cap + 1)) for caps 4, 8, 10
    expect(retries.map((r) => r.delayMs)).toEqual([2, 4, 5]);
  });

  it('retries the configured statuses only', async () => {
    const { client, calls } = setup([problem(500, 'internal_error'), problem(503, 'service_unavailable')], { retryStatuses: [500] });

    const error = await rejection(client.post('/payments', {}));

    expect(calls).toHaveLength(2);
    expect(error).toMatchObject({ status: 503, attempts: 2 });
  });

  it('stops retrying when onRetry throws', async () => {
    const { client, calls } = setup([problem(503, 'x'), json(201, {})], {
      onRetry: () => {
        throw new Error('budget exhausted');
      },
    });

    await expect(client.post('/payments', {})).rejects.toThrow('budget exhausted');
    expect(calls).toHaveLength(1);
  });

  it('returns an empty body as undefined and a non-JSON body as text', async () => {
    const { client } = setup([new Response(null, { status: 204 }), new Response('ok', { status: 200, headers: { 'Content-Type': 'text/plain' } })]);

    await expect(client.post('/a', {})).resolves.toMatchObject({ status: 204, body: undefined });
    await expect(client.post('/b', {})).resolves.toMatchObject({ status: 200, body: 'ok' });
  });

  it('does not retry a success whose JSON cannot be parsed', async () => {
    const { client, calls } = setup([new Response('{"id":', { status: 201, headers: { 'Content-Type': 'application/json' } })]);

    const error = await rejection(client.post('/payments', {}));

    expect(calls).toHaveLength(1);
    expect(error).toMatchObject({ status: 201, code: 'invalid_response', body: '{"id":' });
  });

  it('refuses a bad key or an unserialisable body before sending anything', async () => {
    const { client, fetch } = setup([]);

    await expect(client.post('/payments', {}, { idempotencyKey: '' })).rejects.toThrow(TypeError);
    await expect(client.post('/payments', {}, { idempotencyKey: '"quoted"' })).rejects.toThrow(/double quote/);
    await expect(client.post('/payments', {}, { idempotencyKey: 'clé' })).rejects.toThrow(/printable ASCII/);
    await expect(client.post('/payments', {}, { idempotencyKey: 'k'.repeat(256) })).rejects.toThrow(/255/);
    await expect(client.post('/payments', { amount: 10n })).rejects.toThrow(TypeError);
    await expect(client.post('https://evil.example.com/payments', {})).rejects.toThrow(/relative/);
    expect(fetch).not.toHaveBeenCalled();
  });
});

describe('IdempotentClient cancellation', () => {
  it('rejects promptly with the abort reason while waiting to retry, and clears the timer', async () => {
    useFakeTimers();
    const controller = new AbortController();
    const { client, calls, retries } = setup([problem(503, 'x')], { random: () => 1, baseDelayMs: 5_000 });

    const result = rejection(client.post('/payments', {}, { signal: controller.signal }));
    await jest.advanceTimersByTimeAsync(0);
    expect(retries).toEqual([expect.objectContaining({ delayMs: 5_000 })]);
    controller.abort();

    // No timer is advanced: the rejection does not wait for the backoff.
    const error = await result;
    expect(error).toBeInstanceOf(DOMException);
    expect(error).toMatchObject({ name: 'AbortError' });
    expect(calls).toHaveLength(1);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('rejects promptly with the abort reason during a request, without retrying', async () => {
    useFakeTimers();
    const controller = new AbortController();
    const reason = new Error('user navigated away');
    const { client, calls, retries } = setup(['hang']);

    const result = rejection(client.post('/payments', {}, { signal: controller.signal }));
    await jest.advanceTimersByTimeAsync(0);
    controller.abort(reason);

    expect(await result).toBe(reason);
    expect(calls).toHaveLength(1);
    expect(retries).toHaveLength(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('rejects promptly even when fetch ignores the signal', async () => {
    useFakeTimers();
    const controller = new AbortController();
    const { client } = setup(['hang-deaf']);

    const result = rejection(client.get('/payments/pay_1', { signal: controller.signal }));
    await jest.advanceTimersByTimeAsync(0);
    controller.abort();

    expect(await result).toMatchObject({ name: 'AbortError' });
  });

  it('sends nothing when the signal is already aborted', async () => {
    const { client, fetch } = setup([]);

    await expect(client.post('/payments', {}, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    expect(fetch).not.toHaveBeenCalled();
  });
});

describe('IdempotentClient.get', () => {
  it('sends no key and no body, and retries on the same rules', async () => {
    const { client, calls } = setup([problem(502, 'bad_gateway'), connectionRefused(), json(200, { id: 'ord_1' })]);

    const result = await client.get('/orders/ord_1');

    expect(result).toMatchObject({ status: 200, body: { id: 'ord_1' }, attempts: 3 });
    for (const call of calls) {
      expect(call.method).toBe('GET');
      expect(call.body).toBeUndefined();
      expect(call.headers).toEqual({ Authorization: 'Bearer sk_test_123', Accept: 'application/json' });
    }
  });

  it('does not retry a 404', async () => {
    const { client, calls } = setup([problem(404, 'not_found')]);

    await expect(client.get('/orders/nope')).rejects.toMatchObject({ status: 404, code: 'not_found', idempotencyKey: undefined });
    expect(calls).toHaveLength(1);
  });
});

describe('IdempotentClient options', () => {
  it.each([
    [{ baseUrl: 'not a url' }, /baseUrl/],
    [{ baseUrl: 'ftp://api.example.com' }, /http/],
    [{ baseUrl: 'https://api.example.com/?x=1' }, /query/],
    [{ apiKey: '' }, /apiKey/],
    [{ maxAttempts: 0 }, /maxAttempts/],
    [{ maxAttempts: 2.5 }, /maxAttempts/],
    [{ baseDelayMs: -1 }, /baseDelayMs/],
    [{ timeoutMs: 0 }, /timeoutMs/],
  ])('refuses %p', (override, message) => {
    expect(() => new IdempotentClient({ baseUrl: 'https://api.example.com', apiKey: 'sk', ...override })).toThrow(message);
  });

  it('uses globalThis.fetch by default, looked up at call time', async () => {
    const { fetch } = scriptedFetch(json(200, { ok: true }));
    const original = globalThis.fetch;
    globalThis.fetch = fetch as unknown as typeof globalThis.fetch;
    try {
      const client = new IdempotentClient({ baseUrl: 'https://api.example.com', apiKey: 'sk' });
      await expect(client.get('/health')).resolves.toMatchObject({ body: { ok: true } });
      expect(fetch).toHaveBeenCalledWith('https://api.example.com/health', expect.anything());
    } finally {
      globalThis.fetch = original;
    }
  });
});
