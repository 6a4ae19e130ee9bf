import { randomUUID } from 'node:crypto';
import { Body, Controller, Module, Post } from '@nestjs/common';
import request from 'supertest';
import { Idempotent } from 'safe-retries';
import { keyId } from '../../src/contract/key-id';
import { PRINCIPAL_HEADER, LibraryApp, createLibraryApp } from '../support/library-app';

// Counts the derivations (jest hoists jest.mock above the imports) of a key's id (SHA-256 of scope and key), the module's own function.
jest.mock('../../src/contract/key-id', () => {
  const actual = jest.requireActual<typeof import('../../src/contract/key-id')>('../../src/contract/key-id');
  return { ...actual, keyId: jest.fn(actual.keyId) };
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
  const derivations = keyId as jest.MockedFunction<typeof keyId>;

  beforeAll(async () => {
    t = await createLibraryApp('express', { imports: [WaitingModule], idempotency: { replayCache: { enabled: false } } });
  });
  afterAll(() => t?.close());

  /** The derivations of one request to `path` with `key`. */
  const derivedBy = async (path: string, key: string, status: number): Promise<number> => {
    derivations.mockClear();
    await request(t.app.getHttpServer()).post(path).set(PRINCIPAL_HEADER, 'acct_derive').set('Idempotency-Key', key).send({ name: key }).expect(status);
    return derivations.mock.calls.length;
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
