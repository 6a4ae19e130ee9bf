import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET } from '../../src/config/config';
import { PUBLISHED_DEMO_KEY } from '../../src/config/production';
import { TestApp, countRows, createTestApp } from '../support/app';
import { AppProcess, PROCESS_CLIENT, startAppProcess } from '../support/app-process';
import { CardNetworkProcess, Ledger, startCardNetworkProcess } from '../support/card-network';
import { TestDatabase, createTestDatabase } from '../support/database';
import { builtFile } from '../support/dist';
import { paymentBody } from '../support/fixtures';

/**
 * Every NODE_ENV but development and test gets the production rules, which
 * refuse what is only for development (the embedded card network simulator,
 * its published secrets, plain http to a remote network, the embedded
 * PostgreSQL, an HTTP_TRUST_PROXY of every address) with
 * one line naming the variable; it starts against a real network with secrets
 * of its own, and warns about a test-mode key. A card number is never a `source`, and
 * the simulator's fault methods are sources only while it is the network.
 */
const run = promisify(execFile);

const API_KEY = 'sk_live_production_spec_0123456789';
const NETWORK_SECRET = 'sk_test_production_spec_network_0123';
const WEBHOOK_SECRET = 'whsec_production_spec_0123456789abcdef';
const DB_PASSWORD = 'db-password-never-printed';
const PRODUCTION: Record<string, string> = {
  NODE_ENV: 'production',
  API_KEYS: `shop:${API_KEY}`,
  CARD_NETWORK_URL: 'https://api.stripe.com',
  CARD_NETWORK_SECRET: NETWORK_SECRET,
  CARD_NETWORK_WEBHOOK_SECRET: WEBHOOK_SECRET,
  // Unreachable: a configuration that passes the checks stops at the database instead.
  DATABASE_URL: `postgres://nobody:${DB_PASSWORD}@127.0.0.1:1/none`,
  IDEMPOTENCY_ENCRYPTION_KEYS: `k1:${randomBytes(32).toString('base64')}`,
  LOG_LEVEL: 'warn',
};
const SECRETS = [API_KEY, NETWORK_SECRET, WEBHOOK_SECRET, DB_PASSWORD, DEFAULT_CARD_NETWORK_SECRET, DEFAULT_WEBHOOK_SECRET, PUBLISHED_DEMO_KEY];

/** Card-number-shaped sources: bare, spaced, dashed, inside a token. */
const CARD_NUMBERS = ['4242424242424242', '4242 4242 4242 4242', '4000-0566-5566-5556', 'tok_4111111111111111', 'pm_5555555555554444', '378282246310005'];
const digitsOf = (value: string) => value.replace(/\D/g, '');

/** Every row of every table of the app, as text. */
async function everything(dataSource: DataSource): Promise<string> {
  const tables = await dataSource.query<{ table_name: string }[]>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
  );
  let text = '';
  for (const { table_name } of tables) {
    const [{ rows }] = await dataSource.query<{ rows: string }[]>(`SELECT coalesce(string_agg(t::text, E'\\n'), '') AS rows FROM "${table_name}" t`);
    text += rows;
  }
  return text;
}

describe('production refuses what is only for development (e2e)', () => {
  jest.setTimeout(120_000);
  let MAIN: string;
  let cwd: string;

  beforeAll(() => {
    // Away from a developer's .env, which main.ts would read.
    cwd = mkdtempSync(join(tmpdir(), 'safe-retries-production-'));
    MAIN = builtFile('src/main.js');
  });
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));

  /** Boots dist/src/main.js with PRODUCTION changed by `change` (undefined: unset); it never gets far. */
  async function boot(change: Record<string, string | undefined>): Promise<{ code: number; stderr: string; stdout: string }> {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, ...PRODUCTION, ...change };
    for (const [name, value] of Object.entries(env)) if (value === undefined) delete env[name];
    try {
      await run(process.execPath, [MAIN], { env, cwd, timeout: 30_000 });
    } catch (error) {
      const { code, stderr, stdout } = error as { code: number; stderr: string; stdout: string };
      return { code, stderr, stdout };
    }
    throw new Error('the app started');
  }

  it.each([
    ['CARD_NETWORK_URL', { CARD_NETWORK_URL: undefined }, /^refusing to start: CARD_NETWORK_URL is not set, so the embedded card network simulator/],
    ['CARD_NETWORK_SECRET', { CARD_NETWORK_SECRET: DEFAULT_CARD_NETWORK_SECRET }, /^refusing to start: CARD_NETWORK_SECRET is the card network simulator's published test key/],
    ['CARD_NETWORK_SECRET', { CARD_NETWORK_SECRET: undefined }, /^refusing to start: CARD_NETWORK_SECRET is the card network simulator's published test key/],
    ['CARD_NETWORK_WEBHOOK_SECRET', { CARD_NETWORK_WEBHOOK_SECRET: DEFAULT_WEBHOOK_SECRET }, /^refusing to start: CARD_NETWORK_WEBHOOK_SECRET holds the card network simulator's published webhook secret/],
    ['CARD_NETWORK_WEBHOOK_SECRET', { CARD_NETWORK_WEBHOOK_SECRET: `${WEBHOOK_SECRET},${DEFAULT_WEBHOOK_SECRET}` }, /^refusing to start: CARD_NETWORK_WEBHOOK_SECRET holds the card network simulator's published webhook secret/],
    ['CARD_NETWORK_WEBHOOK_SECRET', { CARD_NETWORK_WEBHOOK_SECRET: undefined }, /^refusing to start: CARD_NETWORK_WEBHOOK_SECRET /],
    ['CARD_NETWORK_URL', { CARD_NETWORK_URL: 'http://payments.example.com' }, /^refusing to start: CARD_NETWORK_URL uses http to a host that is not this machine/],
    ['CARD_NETWORK_URL', { CARD_NETWORK_URL: 'http://10.0.0.5:4242' }, /^refusing to start: CARD_NETWORK_URL uses http/],
    ['CARD_NETWORK_URL', { CARD_NETWORK_URL: 'http://127.example.com' }, /^refusing to start: CARD_NETWORK_URL uses http/],
    ['DATABASE_URL', { DATABASE_URL: undefined }, /^refusing to start: DATABASE_URL is not set, so the embedded development PostgreSQL/],
    ['IDEMPOTENCY_ENCRYPTION_KEYS', { IDEMPOTENCY_ENCRYPTION_KEYS: undefined }, /^refusing to start: IDEMPOTENCY_ENCRYPTION_KEYS is not set, so webhook endpoints' signing secrets/],
    ['API_KEYS', { API_KEYS: `shop:${API_KEY},demo:${PUBLISHED_DEMO_KEY}` }, /^refusing to start: API_KEYS gives client "demo" the published demo key/],
    ['HTTP_TRUST_PROXY', { HTTP_TRUST_PROXY: '0.0.0.0/0' }, /^refusing to start: HTTP_TRUST_PROXY holds a range of every address \(\/0\)/],
    ['HTTP_TRUST_PROXY', { HTTP_TRUST_PROXY: '10.0.0.0/8, ::/0' }, /^refusing to start: HTTP_TRUST_PROXY holds a range of every address/],
    ['HTTP_TRUST_PROXY', { HTTP_TRUST_PROXY: '::ffff:0:0/96' }, /^refusing to start: HTTP_TRUST_PROXY holds every IPv4 address/],
    ['HTTP_TRUST_PROXY', { HTTP_TRUST_PROXY: '::ffff:0.0.0.0/96' }, /^refusing to start: HTTP_TRUST_PROXY holds every IPv4 address/],
    ['HTTP_TRUST_PROXY', { HTTP_TRUST_PROXY: '0.0.0.0/1,128.0.0.0/1' }, /^refusing to start: HTTP_TRUST_PROXY holds every IPv4 address/],
  ])('refuses %s (%j): exit 1, one line naming it, no secret printed', async (_name, change, message) => {
    const { code, stderr } = await boot(change);
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr.trim()).toMatch(message);
    expect(stderr).toContain('(NODE_ENV=production)');
    for (const secret of SECRETS) expect(stderr).not.toContain(secret);
  });

  it('a command (purge) without DATABASE_URL refuses in the same words, and starts no PostgreSQL', async () => {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, ...PRODUCTION };
    delete env.DATABASE_URL;
    const failed = await run(process.execPath, [builtFile('src/cli/purge.js')], { env, cwd, timeout: 30_000 }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).toBe(1);
    expect(failed!.stderr.trim()).toMatch(/^refusing to start: DATABASE_URL is not set, so the embedded development PostgreSQL.*\(NODE_ENV=production\)$/);
    expect(existsSync(join(cwd, '.data'))).toBe(false);
  });

  it.each([
    ['https://api.stripe.com', {}],
    ['http://127.0.0.1:4242', { CARD_NETWORK_URL: 'http://127.0.0.1:4242' }],
    ['http://127.3.2.1:4242', { CARD_NETWORK_URL: 'http://127.3.2.1:4242' }],
    ['http://localhost:4242', { CARD_NETWORK_URL: 'http://localhost:4242' }],
    ['http://[::1]:4242', { CARD_NETWORK_URL: 'http://[::1]:4242' }],
  ])('passes the checks with CARD_NETWORK_URL=%s and secrets of its own (stops later, at the unreachable database)', async (_url, change) => {
    const { code, stderr } = await boot(change);
    expect(code).toBe(1);
    expect(stderr.trim()).toMatch(/^cannot connect to PostgreSQL at postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none: /);
    for (const secret of SECRETS) expect(stderr).not.toContain(secret);
  });

  it.each(['staging', 'prod', 'Production', 'preprod'])('gets the production rules with NODE_ENV=%s: the embedded simulator is refused', async (nodeEnv) => {
    const { code, stderr } = await boot({ NODE_ENV: nodeEnv, CARD_NETWORK_URL: undefined });
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr.trim()).toMatch(/^refusing to start: CARD_NETWORK_URL is not set/);
    expect(stderr).toContain(`(NODE_ENV=${nodeEnv.toLowerCase()})`);
  });

  it.each([
    ['METRICS_PORT and METRICS_TOKEN (every address)', { METRICS_PORT: '9464', METRICS_TOKEN: 'metrics-production-token-0123' }],
    ['METRICS_PORT without a token (loopback only)', { METRICS_PORT: '9464' }],
    ['HTTP_TRUST_PROXY of its proxies', { HTTP_TRUST_PROXY: '10.0.0.0/8,fd00::/8' }],
  ])('passes the checks with %s (stops later, at the unreachable database)', async (_name, change) => {
    const { code, stderr } = await boot(change);
    expect(code).toBe(1);
    expect(stderr.trim()).toMatch(/^cannot connect to PostgreSQL/);
  });

  it('warns in one line, naming CARD_NETWORK_SECRET, about a test-mode key; not about a live one', async () => {
    const test = await boot({});
    const warnings = test.stdout.split('\n').filter((l) => l.includes('test-mode key'));
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0])).toMatchObject({ level: 40, msg: expect.stringMatching(/^CARD_NETWORK_SECRET is a test-mode key \(sk_test_\.\.\.\)/) });
    for (const secret of SECRETS) expect(test.stdout).not.toContain(secret);
    const live = await boot({ CARD_NETWORK_SECRET: 'sk_live_production_spec_network_0123' });
    expect(live.stderr.trim()).toMatch(/^cannot connect to PostgreSQL/);
    expect(live.stdout).not.toContain('test-mode key');
  });

  it('without NODE_ENV=production, the development defaults still start', async () => {
    // The embedded simulator and its published secrets; only the database stops it here.
    for (const nodeEnv of [undefined, 'development', 'test']) {
      const { code, stderr } = await boot({ NODE_ENV: nodeEnv, CARD_NETWORK_URL: undefined, CARD_NETWORK_SECRET: undefined, CARD_NETWORK_WEBHOOK_SECRET: undefined });
      expect(code).toBe(1);
      expect(stderr.trim()).toMatch(/^cannot connect to PostgreSQL/);
    }
  });
});

describe('production against a card network of its own (e2e)', () => {
  jest.setTimeout(120_000);
  let db: TestDatabase;
  let network: CardNetworkProcess;
  let ledger: Ledger;
  let app: AppProcess;
  let dataSource: DataSource;

  beforeAll(async () => {
    db = await createTestDatabase();
    // The standalone simulator on loopback, with a secret that is not the published one.
    network = await startCardNetworkProcess({ env: { CARD_NETWORK_SECRET: NETWORK_SECRET } });
    ledger = new Ledger(network.url, NETWORK_SECRET);
    app = await startAppProcess({
      env: {
        NODE_ENV: 'production',
        DATABASE_URL: db.url,
        CARD_NETWORK_URL: network.url,
        CARD_NETWORK_SECRET: NETWORK_SECRET,
        CARD_NETWORK_WEBHOOK_SECRET: WEBHOOK_SECRET,
        IDEMPOTENCY_ENCRYPTION_KEYS: PRODUCTION.IDEMPOTENCY_ENCRYPTION_KEYS,
        // Every request line (info), to show what a line carries.
        LOG_LEVEL: 'info',
      },
    });
    dataSource = await new DataSource({ type: 'postgres', url: db.url }).initialize();
  });
  afterAll(async () => {
    await app?.stop();
    await dataSource?.destroy();
    await network?.stop();
    await db?.drop();
  });

  const pay = (body: Record<string, unknown>, key = randomUUID()) =>
    fetch(`${app.url}/payments`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${PROCESS_CLIENT.key}`, 'Idempotency-Key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('refuses a card-number-shaped source: 400 on source, nothing stored, nothing logged, the key free', async () => {
    for (const source of CARD_NUMBERS) {
      const key = randomUUID();
      const res = await pay(paymentBody({ source }), key);
      expect(res.status).toBe(400);
      const problem = (await res.json()) as { code: string; errors: { field: string; messages: string[] }[] };
      expect(problem.code).toBe('validation_failed');
      expect(problem.errors.map((e) => e.field)).toEqual(['source']);
      expect(JSON.stringify(problem)).not.toContain(digitsOf(source).slice(0, 13));
      // The key was released: the corrected request with the same key runs.
      expect((await pay(paymentBody({ description: `corrected ${key}` }), key)).status).toBe(201);
    }
    // The 400s were logged (a warning line per request), without the body.
    const refused = app.output().split('\n').filter((l) => l.includes('"statusCode":400'));
    expect(refused).toHaveLength(CARD_NUMBERS.length);
    const written = (await everything(dataSource)) + app.output();
    for (const source of CARD_NUMBERS) {
      expect(written).not.toContain(source);
      expect(digitsOf(written)).not.toContain(digitsOf(source));
    }
    expect(await countRows(dataSource, 'payments')).toBe(CARD_NUMBERS.length);
    expect(await ledger.intents()).toHaveLength(CARD_NUMBERS.length);
  });

  it("charges through the network with the app's own secret, and refuses the simulator's fault methods before the network", async () => {
    const description = `production ${randomUUID()}`;
    const paid = await pay(paymentBody({ description }));
    expect(paid.status).toBe(201);
    expect(await ledger.chargesDescribed(description)).toHaveLength(1);

    const before = { payments: await countRows(dataSource, 'payments'), intents: (await ledger.intents()).length };
    for (const source of ['tok_chargeThenHang', 'tok_chargeThenError', 'tok_chargeThenDrop', 'pm_card_chargeThenHang']) {
      const res = await pay(paymentBody({ source }));
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: 'validation_failed', errors: [{ field: 'source' }] });
    }
    expect(await countRows(dataSource, 'payments')).toBe(before.payments);
    expect((await ledger.intents()).length).toBe(before.intents);
  });
});

describe("the simulator's fault methods where the simulator is not the network (e2e)", () => {
  let t: TestApp;

  // Stripe itself: nothing here may reach it, and nothing does (the 400 comes first).
  beforeAll(async () => {
    t = await createTestApp({ env: { CARD_NETWORK_URL: 'https://api.stripe.com' } });
  });
  afterAll(() => t?.close());

  it.each(['tok_chargeThenHang', 'tok_chargeThenError', 'tok_chargeThenDrop', 'pm_card_chargeThenError'])('refuses %s: 400 on source, nothing stored, the key free', async (source) => {
    const key = randomUUID();
    const res = await request(t.app.getHttpServer()).post('/payments').set(t.auth()).set('Idempotency-Key', key).send(paymentBody({ source })).expect(400);
    expect(res.body).toMatchObject({ code: 'validation_failed', errors: [{ field: 'source' }] });
    expect(await countRows(t.dataSource, 'payments')).toBe(0);
    expect(await countRows(t.dataSource, 'idempotency_keys')).toBe(0);
  });
});
