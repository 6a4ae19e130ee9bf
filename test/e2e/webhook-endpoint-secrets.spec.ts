import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import request from 'supertest';
import { EndpointSecrets } from '../../src/webhook-endpoints/endpoint-secrets';
import { TestApp, createTestApp } from '../support/app';
import { TestDatabase, createTestDatabase } from '../support/database';
import { REPO_ROOT, builtFile } from '../support/dist';

/**
 * Endpoints' signing secrets survive changes of IDEMPOTENCY_ENCRYPTION_KEYS:
 * a ring turned on seals the secrets kept in clear; a new newest key reseals
 * the others at the next boot; a key that still seals a secret cannot leave
 * the ring (the boot stops, naming it and how many endpoints need it);
 * `npm run webhook-secrets:reseal` reseals without a restart. Each boot runs
 * on the same database, as a deploy does.
 */
jest.setTimeout(120_000);

const run = promisify(execFile);
const ring = (...ids: string[]) => ids.map((id) => `${id}:${KEYS[id]}`).join(',');
const KEYS: Record<string, string> = Object.fromEntries(['k1', 'k2', 'k3'].map((id) => [id, randomBytes(32).toString('base64')]));

describe('webhook endpoint secrets across key rings (e2e)', () => {
  let db: TestDatabase;
  const boot = (keys?: string) => createTestApp({ database: db, env: { IDEMPOTENCY_JOBS: 'off', ...(keys ? { IDEMPOTENCY_ENCRYPTION_KEYS: keys } : {}) } });
  const stored = async (t: TestApp) =>
    (await t.dataSource.query<{ id: string; secret: string }[]>('SELECT id, secret FROM webhook_endpoints ORDER BY id')).map((r) => ({ ...r }));
  /** What the deliveries would be signed with, opened by this boot's ring. */
  const opened = async (t: TestApp) => {
    const secrets = t.app.get(EndpointSecrets);
    return (await stored(t)).map((r) => secrets.open(r.id, r.secret));
  };

  /** `npm run webhook-secrets:reseal`, from dist/, against this suite's database. */
  const reseal = (keys: string) =>
    run(process.execPath, [builtFile('src/cli/webhook-secrets-reseal.js')], {
      env: { ...process.env, LOG_LEVEL: 'warn', DATABASE_URL: db.url, IDEMPOTENCY_ENCRYPTION_KEYS: keys },
      cwd: REPO_ROOT,
      timeout: 60_000,
    });

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db?.drop());

  it('seals the secrets kept in clear when a ring is turned on, reseals under a new key, and refuses to drop a key still in use', async () => {
    // No ring (outside production): two endpoints, their secrets in clear.
    let t = await boot();
    const given: string[] = [];
    for (const n of [1, 2]) {
      const made = await request(t.app.getHttpServer())
        .post('/webhook-endpoints')
        .set(t.auth())
        .set('Idempotency-Key', randomUUID())
        .send({ url: `http://127.0.0.1:9/hooks/${n}`, event_types: ['*'] })
        .expect(201);
      given.push(made.body.secret as string);
    }
    const byId = (await stored(t)).map((r) => r.secret);
    expect(byId.sort()).toEqual([...given].sort());
    await t.close();

    // The ring turned on: sealed under k1 at boot, each still the secret the client was given.
    t = await boot(ring('k1'));
    expect((await stored(t)).every((r) => r.secret.startsWith('sealed:v1:k1:'))).toBe(true);
    expect((await opened(t)).sort()).toEqual([...given].sort());
    await t.close();

    // A new newest key, the old one kept: resealed under k2.
    t = await boot(ring('k2', 'k1'));
    expect((await stored(t)).every((r) => r.secret.startsWith('sealed:v1:k2:'))).toBe(true);
    expect((await opened(t)).sort()).toEqual([...given].sort());
    await t.close();

    // k2 still seals both: a process whose ring lacks it stops at boot, naming it and the count.
    for (const keys of [ring('k3'), '']) {
      const refused = await reseal(keys).then(
        () => undefined,
        (error: { code: number; stderr: string }) => error,
      );
      expect(refused).toMatchObject({ code: 1 });
      expect(refused!.stderr).toMatch(/IDEMPOTENCY_ENCRYPTION_KEYS lacks keys that webhook endpoints still need \("k2" seals 2 endpoint secrets\)/);
    }

    // Without k1, nothing is missing: it sealed nothing any more.
    t = await boot(ring('k2'));
    expect((await opened(t)).sort()).toEqual([...given].sort());

    // A secret written in clear meanwhile (by an instance without the ring): the command seals it without a restart.
    const [first] = await stored(t);
    await t.dataSource.query('UPDATE webhook_endpoints SET secret = $2 WHERE id = $1', [first.id, EndpointSecrets.generate()]);
    const resealed = await reseal(ring('k2'));
    expect(resealed.stdout.trim()).toBe('sealed 1 webhook endpoint secrets under the newest key');
    expect((await stored(t)).every((r) => r.secret.startsWith('sealed:v1:k2:'))).toBe(true);
    await t.close();
  });
});
