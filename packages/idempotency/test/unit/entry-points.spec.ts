import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import * as root from 'safe-retries';
import * as nats from 'safe-retries/nats';
import * as redis from 'safe-retries/redis';
import * as swagger from 'safe-retries/swagger';
import * as testing from 'safe-retries/testing';

/**
 * The package's entry points: the root is what an app writes against, and
 * loads none of @nestjs/swagger, ioredis, nats, @nestjs/graphql, graphql and
 * @nestjs/microservices (optional peers, or the app's): every module it
 * reaches is read here and none imports them. The subpaths are where they are.
 */
const SRC = resolve(__dirname, '../../src');

/**
 * The library modules `entry` reaches through its relative imports, the
 * packages they load as they are loaded (`packages`), and those they load
 * later, by a dynamic import() (`lazily`).
 */
function reach(entry: string): { files: Set<string>; packages: Set<string>; lazily: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const lazily = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const text = readFileSync(file, 'utf8');
    // Static imports and re-exports (type-only ones are erased), and dynamic import().
    for (const [, typeOnly, specifier] of text.matchAll(/^(?:import|export)\s+(type\s+)?[^'";]*?from\s+'([^']+)'/gm)) {
      if (!typeOnly) add(file, specifier);
    }
    for (const [, specifier] of text.matchAll(/import\('([^']+)'\)/g)) lazily.add(specifier);
  };
  const add = (from: string, specifier: string) => {
    if (!specifier.startsWith('.')) return void packages.add(specifier);
    const base = resolve(dirname(from), specifier);
    const candidates = [`${base}.ts`, join(base, 'index.ts')];
    const found = candidates.find((c) => {
      try {
        readFileSync(c);
        return true;
      } catch {
        return false;
      }
    });
    if (!found) throw new Error(`${from}: cannot resolve ${specifier}`);
    visit(found);
  };
  visit(entry);
  return { files, packages, lazily };
}

describe('entry points', () => {
  it('the root exports what an app writes against, and nothing else: at most 25 names, types included', () => {
    expect(Object.keys(root).sort()).toEqual(
      [
        'IDEMPOTENCY_DEFAULTS',
        'IDEMPOTENT_OUTCOME',
        'HttpResponse',
        'IdempotencyContext',
        'IdempotencyErrorCode',
        'IdempotencyKeys',
        'IdempotencyModule',
        'IdempotencyProblem',
        'IdempotencyPurgeService',
        'IdempotencyRecovery',
        'Idempotent',
        'LeaseLostError',
        'Operation',
        'PhasedOperation',
        'Resumes',
        'formatDuration',
        'parseDuration',
        'parseKeyRing',
        'phasedOperation',
        'transactionalClsModule',
      ].sort(),
    );
    const source = readFileSync(join(SRC, 'index.ts'), 'utf8');
    const names = [...source.matchAll(/^export (?:type )?\{([^}]*)\}/gm)].flatMap((m) => m[1].split(',').map((n) => n.trim()).filter(Boolean));
    expect(new Set(names).size).toBe(names.length);
    expect(names.length).toBeLessThanOrEqual(25);
  });

  it('the root never loads @nestjs/swagger, ioredis, nats, GraphQL, @nestjs/microservices nor the Redis store', () => {
    const { files, packages, lazily } = reach(join(SRC, 'index.ts'));
    expect(files.size).toBeGreaterThan(20);
    expect(packages).toContain('@nestjs/common');
    const optional = (p: string) => /^(@nestjs\/(swagger|graphql|mercurius|apollo|microservices)|graphql|mercurius|ioredis|nats)(\/|$)/.test(p);
    expect([...packages].filter(optional)).toEqual([]);
    // The module builds no store but the PostgreSQL one: an app gives it the others (`stores`).
    expect([...files].filter((f) => f.includes(`${join('stores', 'redis')}`))).toEqual([]);
    expect([...lazily]).toEqual([]);
  });

  it('the swagger subpath is where @nestjs/swagger is loaded; the Redis store loads ioredis when it connects', () => {
    expect(reach(join(SRC, 'swagger/index.ts')).packages).toContain('@nestjs/swagger');
    expect(Object.keys(swagger).sort()).toEqual(['IDEMPOTENCY_OPTIONS', 'applyIdempotencyPolicy', 'describeIdempotentRoutes', 'policyMarkdown']);
    expect(Object.keys(redis)).toEqual(['RedisIdempotencyStore']);
    expect(reach(join(SRC, 'stores/redis/index.ts')).lazily).toEqual(new Set(['ioredis']));
  });

  it('the nats subpath is the JetStream publisher, which loads nats when it connects', () => {
    expect(Object.keys(nats)).toEqual(['natsOutboxPublisher']);
    const { packages, lazily } = reach(join(SRC, 'outbox/nats/index.ts'));
    expect([...packages]).toEqual([]);
    expect(lazily).toEqual(new Set(['nats']));
  });

  it('the testing subpath is the store contract kit and the PostgreSQL store provider, and loads nothing of jest', () => {
    expect(Object.keys(testing).sort()).toEqual(['ContractDriver', 'IDEMPOTENCY_POSTGRES_STORE', 'ResponseNotStoredError', 'STORE_CONTRACT', 'describeStoreContract', 'idempotencyStoreOf']);
    expect([...reach(join(SRC, 'testing/index.ts')).packages].filter((p) => /jest/.test(p))).toEqual([]);
  });
});
