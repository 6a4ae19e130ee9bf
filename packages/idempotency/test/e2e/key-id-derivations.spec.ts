import crypto, { randomUUID } from 'node:crypto';
import { Body, Controller, Module, Post } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from 'safe-retries';
import { PRINCIPAL_HEADER, LibraryApp, createLibraryApp } from '../support/library-app';

const SCOPE = 'acct_derive';

/**
 * The derivations of a key's id under SCOPE, counted as docs/security.md
 * defines the id: a SHA-256 over the scope, a NUL and the key. Every SHA-256
 * the process computes goes through node:crypto's createHash; one fed the
 * scope, then a NUL, is a derivation.
 */
const derivations = { count: 0 };
const createHash = crypto.createHash;
jest.spyOn(crypto, 'createHash').mockImplementation((algorithm: string, options?: crypto.HashOptions) => {
  const hash = createHash(algorithm, options);
  if (algorithm !== 'sha256') return hash;
  const fed: unknown[] = [];
  const update = hash.update.bind(hash) as (data: crypto.BinaryLike, encoding?: crypto.Encoding) => crypto.Hash;
  hash.update = ((data: crypto.BinaryLike, encoding?: crypto.Encoding) => {
    fed.push(data);
    if (fed.length === 2 && fed[0] === SCOPE && fed[1] === '\0') derivations.count++;
    return update(data, encoding);
  }) as crypto.Hash['update'];
  return hash;
});

@Controller('derive')
class WaitingController {
  /** A durable route whose duplicates wait: its owner announces the key settled. */
  @Post('wait')
  @Idempotent({ wait: '5s' })
  create(@Body() body: { name: string }) {
    return { name: body.name };
  }
}

@Module({ controllers: [WaitingController] })
class WaitingModule {}

/**
 * A key's id is derived once per request, where the request is built, and
 * carried with it: the telemetry, the claim, the completion, a recovery point
 * and the settlement use it, none derives it again. On the PostgreSQL store,
 * through the library's routes, one request at a time.
 */
describe('the key id, derived once per request (e2e)', () => {
  let t: LibraryApp;

  beforeAll(async () => {
    t = await createLibraryApp('express', { imports: [WaitingModule], idempotency: { replayCache: { enabled: false } } });
  });
  afterAll(() => t?.close());

  /** The derivations of one request to `path` with `key`. */
  const derivedBy = async (path: string, key: string, status: number): Promise<number> => {
    derivations.count = 0;
    await request(t.app.getHttpServer()).post(path).set(PRINCIPAL_HEADER, SCOPE).set('Idempotency-Key', key).send({ name: key }).expect(status);
    return derivations.count;
  };

  it('once for a new key and once for its replay, on every path', async () => {
    const counts: Record<string, [number, number]> = {};
    for (const path of ['/lib/widgets', '/derive/wait', '/lib/phased', '/lib/widgets-one', '/lib/widgets-one-wait']) {
      const key = randomUUID();
      counts[path] = [await derivedBy(path, key, 201), await derivedBy(path, key, 201)];
    }
    expect(counts).toEqual({
      '/lib/widgets': [1, 1],
      '/derive/wait': [1, 1],
      '/lib/phased': [1, 1],
      '/lib/widgets-one': [1, 1],
      '/lib/widgets-one-wait': [1, 1],
    });
  });
});
