import { createHash, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { All, Controller, Module, NestMiddleware, NestModule, MiddlewareConsumer } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from 'safe-retries';
import { LIBRARY_TABLE, LibraryApp, PRINCIPAL_HEADER, createLibraryApp } from './library-app';
import { keyId } from './keys-table';

/**
 * The fingerprint the module stores with a key (the keys table's
 * `fingerprint`, docs/security.md): the first 16 bytes of SHA-256 over the
 * method, the path, the query sorted by name then value, and the body as
 * canonical JSON (object keys sorted at every depth, no insignificant
 * whitespace; no body: nothing), joined by newlines.
 *
 * A request's "body" here is any JS value, undefined and NaN included: the
 * routes' `fingerprint(req)` option (the part of the body that defines the
 * operation) hands the module the value the test registered for the request.
 */
const VALUES = new Map<string, unknown>();
const CASE_HEADER = 'x-fingerprint-case';
const LOWER_METHOD_HEADER = 'x-lower-case-method';
const valueOf = (req: { headers: Record<string, string | string[] | undefined> }) => VALUES.get(req.headers[CASE_HEADER] as string);

@Controller()
class FingerprintRoutes {
  @All(['orders', 'orders/:id', 'order', 'x'])
  @Idempotent({ fingerprint: valueOf, commit: 'one' })
  answer() {
    return {};
  }
}

/** A server that reports the method in lower case (as the request's `method` may be, whatever the wire says). */
class LowerCaseMethod implements NestMiddleware {
  use(req: { method: string; headers: Record<string, unknown> }, _res: unknown, next: () => void) {
    if (req.headers[LOWER_METHOD_HEADER]) req.method = req.method.toLowerCase();
    next();
  }
}

@Module({ controllers: [FingerprintRoutes] })
class FingerprintModule implements NestModule {
  configure(consumer: MiddlewareConsumer) {
    consumer.apply(LowerCaseMethod).forRoutes(FingerprintRoutes);
  }
}

/** The documented fingerprint, as hex. */
export function definedFingerprint(method: string, path: string, query: string, canonicalBody: string): string {
  return createHash('sha256').update(`${method}\n${path}\n${query}\n${canonicalBody}`).digest().subarray(0, 16).toString('hex');
}

export interface StoredRequest {
  method?: 'POST' | 'PUT' | 'GET' | 'post';
  /** The path and query, as sent ('/orders?a=1&b=2'); '/x' by default. */
  url?: string;
  /** What the route's fingerprint option gives the module. */
  value: unknown;
}

export interface Fingerprints {
  /** The fingerprints (hex) the module stores for these requests, each under a new key, in their order. */
  of(requests: StoredRequest[]): Promise<string[]>;
  /** The stored fingerprint of one request whose body (fingerprint) is `value`. */
  ofValue(value: unknown, url?: string): Promise<string>;
  close(): Promise<void>;
}

const PRINCIPAL = 'fingerprints';
const AT_ONCE = 16;

export async function fingerprints(): Promise<Fingerprints> {
  // Listening: one server for every request (supertest would open one per request otherwise).
  const lib: LibraryApp = await createLibraryApp('express', { imports: [FingerprintModule], idempotency: { replayCache: { enabled: false } }, listen: true });
  const server = lib.url!;
  const store = async ({ method = 'POST', url = '/x', value }: StoredRequest): Promise<string> => {
    const key = randomUUID();
    VALUES.set(key, value);
    try {
      const wire = method === 'post' ? 'POST' : method;
      let r = request(server)[wire.toLowerCase() as 'post' | 'put' | 'get'](url).set(PRINCIPAL_HEADER, PRINCIPAL).set('Idempotency-Key', key).set(CASE_HEADER, key);
      if (method === 'post') r = r.set(LOWER_METHOD_HEADER, '1');
      const answer = await r;
      if (answer.status >= 300) throw new Error(`${method} ${url}: ${answer.status} ${answer.text}`);
    } finally {
      VALUES.delete(key);
    }
    const [row] = await lib.dataSource.query<{ fingerprint: string }[]>(`SELECT encode(fingerprint, 'hex') AS fingerprint FROM "${LIBRARY_TABLE}" WHERE id = $1`, [
      keyId(PRINCIPAL, key),
    ]);
    return row.fingerprint;
  };
  const of = async (requests: StoredRequest[]) => {
    const out: string[] = [];
    for (let i = 0; i < requests.length; i += AT_ONCE) out.push(...(await Promise.all(requests.slice(i, i + AT_ONCE).map(store))));
    return out;
  };
  return {
    of,
    ofValue: async (value, url) => (await of([{ value, url }]))[0],
    close: () => lib.close(),
  };
}

/**
 * The canonical JSON of a JSON value as the definition above states it, for
 * properties over many values: object keys sorted (as strings) at every
 * depth, no whitespace, strings and numbers as JSON.stringify writes them.
 */
export function canonicalText(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalText(record[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Runs `check` over `numRuns` samples of `arbitrary`, each with the stored fingerprints of its requests (sent many at once). */
export async function forSamples<T>(
  f: Fingerprints,
  arbitrary: fc.Arbitrary<T>,
  requests: (sample: T) => StoredRequest[],
  check: (sample: T, stored: string[]) => void,
  numRuns = 100,
): Promise<void> {
  const samples = fc.sample(arbitrary, numRuns);
  const sent = samples.map(requests);
  const stored = await f.of(sent.flat());
  let at = 0;
  samples.forEach((sample, i) => {
    check(sample, stored.slice(at, at + sent[i].length));
    at += sent[i].length;
  });
}
