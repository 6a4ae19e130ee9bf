import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@safe-retries/dev-postgres';
import { AppProcess, startAppProcess } from '../support/app-process';
import { orderBody } from '../support/fixtures';
import { CREATE_ORDER, GraphqlAnswer } from '../support/graphql';
import { createTestDatabase } from '../support/database';
import { builtFile } from '../support/dist';
import { waitFor } from '../support/http-client';

/**
 * The built app (dist/, as `npm start` runs it) on a machine with no
 * PostgreSQL: it starts the embedded one, migrates, answers, and on SIGTERM
 * exits 0 and leaves no postgres process behind. `npm test` builds dist first;
 * a stale dist/ fails the suite (builtFile).
 */
const KEY = 'sk_test_boot_0123456789abcdef';
const METRICS_TOKEN = 'metrics_boot_token_0123456789abcdef';

function postgresProcessesFor(dir: string): string[] {
  try {
    return execFileSync('pgrep', ['-af', 'postgres'], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes(dir));
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

describe('the built app on an embedded PostgreSQL (e2e)', () => {
  jest.setTimeout(120_000);
  let dir: string;
  let child: ChildProcess | undefined;
  let output = '';
  let MAIN: string;

  beforeAll(() => {
    MAIN = builtFile('src/main.js');
    dir = mkdtempSync(join(tmpdir(), 'safe-retries-boot-'));
    chmodSync(dir, 0o755); // PostgreSQL runs as the postgres user when we are root
  });
  afterAll(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('starts, answers, and shuts down cleanly on SIGTERM', async () => {
    const port = await freePort();
    const env: NodeJS.ProcessEnv = { ...process.env, PORT: String(port), API_KEYS: `boot:${KEY}`, METRICS_TOKEN, LOG_LEVEL: 'info' };
    delete env.DATABASE_URL;
    // The embedded PostgreSQL keeps its data under the working directory: a folder of this test's own.
    child = spawn(process.execPath, [MAIN], { env, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
    const base = `http://127.0.0.1:${port}`;

    const health = await waitFor('GET /health 200', async () => {
      if (child!.exitCode !== null) throw new Error(`the app exited early:\n${output}`);
      const res = await fetch(`${base}/health`);
      return res.status === 200 ? res : undefined;
    }, { timeoutMs: 30_000, intervalMs: 200 }).catch((error: Error) => {
      throw new Error(`${error.message}\n${output}`);
    });
    expect(health.status).toBe(200);

    const unauthorized = await fetch(`${base}/orders`);
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await unauthorized.json()).code).toBe('unauthorized');
    for (let i = 0; i < 3; i++) expect((await fetch(`${base}/orders`, { headers: { Authorization: 'Bearer sk_wrong_0123456789abcdef' } })).status).toBe(401);

    const unknown = await fetch(`${base}/no-such-route`, { headers: { Authorization: `Bearer ${KEY}` } });
    expect(unknown.status).toBe(404);
    expect(unknown.headers.get('content-type')).toMatch(/^application\/problem\+json/);

    const doc = await (await fetch(`${base}/docs-json`)).json();
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.paths['/payments'].post['x-idempotency']).toMatchObject({ header: 'Idempotency-Key', lease: '30s', retention: '24h', scope: 'client' });
    expect((await fetch(`${base}/docs`)).status).toBe(200);
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const metrics = await fetch(`${base}/metrics`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(await metrics.text()).toContain('http_request_duration_seconds');

    // The built app's GraphQL endpoint (Mercurius, its cache loaded by import()): createOrder, then its replay.
    const createOrder = () =>
      fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'boot-graphql-1' },
        body: JSON.stringify({ query: CREATE_ORDER, variables: { input: orderBody() } }),
      });
    const created = (await (await createOrder()).json()) as GraphqlAnswer<{ createOrder: { id: string; status: string } }>;
    expect(created.data?.createOrder.status).toBe('pending');
    const replayed = await createOrder();
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(((await replayed.json()) as GraphqlAnswer).data).toEqual(created.data);

    expect(postgresProcessesFor(dir).length).toBeGreaterThan(0);
    const stopping = Date.now();
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    // A shutdown that hung would never exit (the test's timeout ends it); the time is told, not judged.
    console.log(`SIGTERM to exit: ${Date.now() - stopping} ms`);
    expect(postgresProcessesFor(dir)).toEqual([]);
    // Requests were logged (JSON, with the request id), the API key never (Authorization is not among the logged headers).
    expect(output).toContain('"reqId"');
    expect(output).not.toMatch(/"authorization"/i);
    expect(output).not.toContain(KEY);
    expect(output).not.toContain(METRICS_TOKEN);
    // 401s write no line per request: one warning for the address in this minute.
    expect(output).not.toMatch(/"statusCode":401/);
    expect(output.split('\n').filter((l) => l.includes('failed authentication'))).toHaveLength(1);
    // API_KEYS seeded a client: no advice to create one.
    expect(output).not.toContain('client:create');
  });

  it('warns at startup how to create an API key when there is no client and no API_KEYS', async () => {
    const db = await createTestDatabase();
    let app: AppProcess | undefined;
    try {
      app = await startAppProcess({ env: { DATABASE_URL: db.url, API_KEYS: '' } });
      const started = app;
      const line = await waitFor('the no-client warning', () =>
        started.output().split('\n').find((l) => l.includes('npm run client:create -- <name>')),
      );
      expect(JSON.parse(line)).toMatchObject({ level: 40, context: 'ClientsService' });
      expect((await fetch(`${app.url}/orders`)).status).toBe(401);
    } finally {
      await app?.stop();
      await db.drop();
    }
  });

  it('exits with one clear message when the database cannot be reached', () => {
    let failure: { status: number | null; stderr: string } | undefined;
    try {
      execFileSync(process.execPath, [MAIN], {
        env: { ...process.env, DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none', LOG_LEVEL: 'warn' },
        encoding: 'utf8',
        stdio: 'pipe',
        timeout: 30_000,
      });
    } catch (error) {
      failure = error as { status: number | null; stderr: string };
    }
    expect(failure?.status).toBe(1);
    expect(failure?.stderr.trim()).toMatch(/^cannot connect to PostgreSQL at postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none: /);
    expect(failure?.stderr).not.toContain('secret');
    expect(failure?.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('refuses to start in production with the published demo key, and only then', () => {
    const boot = (apiKeys: string) => {
      try {
        execFileSync(process.execPath, [MAIN], {
          // An unreachable database: the refusal comes before any connection. The card network
          // settings are production's own (test/e2e/production.spec.ts refuses each published one).
          env: {
            ...process.env,
            NODE_ENV: 'production',
            API_KEYS: apiKeys,
            DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none',
            CARD_NETWORK_URL: 'https://api.stripe.com',
            CARD_NETWORK_SECRET: 'sk_live_boot_0123456789abcdef',
            CARD_NETWORK_WEBHOOK_SECRET: 'whsec_boot_0123456789abcdef',
            IDEMPOTENCY_ENCRYPTION_KEYS: 'k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=',
          },
          encoding: 'utf8',
          stdio: 'pipe',
          timeout: 30_000,
        });
      } catch (error) {
        return error as { status: number | null; stderr: string };
      }
      return undefined;
    };
    const refused = boot('shop:sk_live_0123456789abcdefXYZ,demo:sk_test_demo_0123456789abcdef');
    expect(refused?.status).toBe(1);
    expect(refused?.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused?.stderr).toMatch(/^refusing to start: API_KEYS gives client "demo" the published demo key/);
    expect(refused?.stderr).not.toContain('sk_test_demo_0123456789abcdef');
    // Another key passes the check (and stops later, at the unreachable database).
    expect(boot('shop:sk_live_0123456789abcdefXYZ')?.stderr).toMatch(/^cannot connect to PostgreSQL/);
  });

  it('exits with a message naming the variable when the configuration is invalid', () => {
    let failure: { status: number | null; stderr: string } | undefined;
    try {
      execFileSync(process.execPath, [MAIN], { env: { ...process.env, PORT: 'eighty' }, encoding: 'utf8', stdio: 'pipe', timeout: 30_000 });
    } catch (error) {
      failure = error as { status: number | null; stderr: string };
    }
    expect(failure?.status).toBe(1);
    expect(failure?.stderr).toContain('PORT');
    expect(failure?.stderr).not.toMatch(/\n\s+at /);
  });

  it('stops a deployment that still sets an older name, naming the variable that replaced it, never its value', () => {
    let failure: { status: number | null; stderr: string } | undefined;
    try {
      execFileSync(process.execPath, [MAIN], {
        env: { ...process.env, STRIPE_API_KEY: 'sk_live_old_name_0123456789', RECOVERY_ENABLED: 'false' },
        encoding: 'utf8',
        stdio: 'pipe',
        timeout: 30_000,
      });
    } catch (error) {
      failure = error as { status: number | null; stderr: string };
    }
    expect(failure?.status).toBe(1);
    expect(failure?.stderr.trim().split('\n')).toEqual([
      'Invalid configuration:',
      '  - STRIPE_API_KEY: no longer read; renamed: set CARD_NETWORK_SECRET',
      '  - RECOVERY_ENABLED: no longer read; replaced: set IDEMPOTENCY_JOBS (on or off: the purge, the recovery job and the outbox relay together)',
    ]);
  });
});
