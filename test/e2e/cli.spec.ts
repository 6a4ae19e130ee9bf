import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { Server, createServer } from 'node:net';
import { promisify } from 'node:util';
import { INestApplicationContext, LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Client } from 'pg';
import request from 'supertest';
import { AppModule } from '../../src/app.module';
import { createCommandContext } from '../../src/cli/with-app-context';
import { loadConfig } from '../../src/config/config';
import { freePort } from '@safe-retries/dev-postgres';
import { keyIdSql } from '../../packages/idempotency/test/support/keys-table';
import { TestApp, createTestApp } from '../support/app';
import { REPO_ROOT, builtFile } from '../support/dist';
import { waitFor } from '../support/http-client';
import { keyIn } from '../support/keys';

/**
 * The command-line tools, as `npm run …` runs them from dist/ (npm test builds
 * first), against this file's database: client:create, client:rotate,
 * client:keys, client:revoke, migration:run,
 * migration:generate (which also proves the entities match the migrations) and purge.
 * A command starts nothing beside its task: no metrics listener, no recovery
 * or purge job, no embedded card network simulator.
 * A dist/ older than src/ fails each test with a sentence saying to build.
 */
const run = promisify(execFile);
const cli = (name: string, args: string[], env: Record<string, string>) =>
  run(process.execPath, [builtFile(`src/cli/${name}.js`), ...args], {
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    cwd: REPO_ROOT,
    timeout: 60_000,
  });

/** A Nest logger that keeps every line (all levels), "context: message". */
class CapturingLogger implements LoggerService {
  readonly lines: string[] = [];
  private keep = (message: unknown, ...rest: unknown[]) => this.lines.push(`${String(rest.at(-1) ?? '')}: ${String(message)}`);
  log = this.keep;
  error = this.keep;
  warn = this.keep;
  debug = this.keep;
  verbose = this.keep;
  fatal = this.keep;
}

/** A port held by this process: anything else that binds it fails (EADDRINUSE). */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return { port: (server.address() as { port: number }).port, server };
}

/** What a server would start, all asked for: the metrics listener, the recovery job, the events' purge, the outbox relay, the embedded simulator. */
const BACKGROUND = /embedded card network simulator|recovery of abandoned phased operations|purge of events|outbox relay started|metrics on http/;

describe('command-line tools (e2e)', () => {
  jest.setTimeout(120_000);
  let t: TestApp;
  let env: Record<string, string>;

  beforeAll(async () => {
    t = await createTestApp();
    env = { DATABASE_URL: t.db.url };
  });
  afterAll(() => t.close());

  it('client:create prints a key once, stores only its SHA-256, and the key authenticates', async () => {
    const { stdout } = await cli('client-create', ['acme-shop'], env);
    const key = /API key \(shown once, store it now\): (sk_[\w-]{43})/.exec(stdout)?.[1];
    expect(key).toBeDefined();
    const rows = await t.dataSource.query<{ key_hash: Buffer; prefix: string }[]>(
      'SELECT k.key_hash, k.prefix FROM client_keys k JOIN clients c ON c.id = k.client_id WHERE c.name = $1',
      ['acme-shop'],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0].key_hash.equals(createHash('sha256').update(key!).digest())).toBe(true);
    expect(rows[0].prefix).toBe(key!.slice(0, 12));
    const dump = JSON.stringify(await t.dataSource.query('SELECT * FROM clients')) + JSON.stringify(await t.dataSource.query('SELECT * FROM client_keys'));
    expect(dump).not.toContain(key);
    await request(t.app.getHttpServer()).get('/orders').set('Authorization', `Bearer ${key}`).expect(200);

    const again = await cli('client-create', ['acme-shop'], env).catch((e: { code: number; stderr: string }) => e);
    expect(again).toMatchObject({ code: 1 });
    expect((again as { stderr: string }).stderr).toContain('a client named "acme-shop" already exists');
  });

  it('client:rotate prints a new key once (only its hash stored), client:keys lists without secrets, client:revoke revokes exactly one', async () => {
    const fail = (e: { code: number; stderr: string }) => e;
    const { stdout: created } = await cli('client-create', ['rotating-shop'], env);
    const first = /API key \(shown once, store it now\): (sk_[\w-]{43})/.exec(created)![1];
    const { stdout: rotated } = await cli('client-rotate', ['rotating-shop'], env);
    const second = /API key \(shown once, store it now\): (sk_[\w-]{43})/.exec(rotated)?.[1];
    expect(second).toBeDefined();
    expect(rotated.split(second!)).toHaveLength(2); // printed once
    const stored = await t.dataSource.query<{ key_hash: Buffer }[]>(
      'SELECT k.key_hash FROM client_keys k JOIN clients c ON c.id = k.client_id WHERE c.name = $1 ORDER BY k.created_at',
      ['rotating-shop'],
    );
    expect(stored.map((r) => r.key_hash.toString('hex'))).toEqual([first, second!].map((k) => createHash('sha256').update(k).digest('hex')));
    const dump = JSON.stringify(await t.dataSource.query('SELECT * FROM client_keys')) + JSON.stringify(await t.dataSource.query('SELECT * FROM clients'));
    expect(dump).not.toContain(second!);
    const http = () => request(t.app.getHttpServer());
    await http().get('/orders').set('Authorization', `Bearer ${first}`).expect(200);
    await http().get('/orders').set('Authorization', `Bearer ${second!}`).expect(200);

    const { stdout: listed } = await cli('client-keys', ['rotating-shop'], env);
    const lines = listed.trim().split('\n');
    expect(lines[0]).toBe('id\tprefix\tcreated_at\trevoked_at');
    expect(lines.slice(1).map((l) => l.split('\t')[1])).toEqual([first.slice(0, 12), second!.slice(0, 12)]);
    expect(lines.slice(1).map((l) => l.split('\t')[3])).toEqual(['-', '-']);
    expect(listed).not.toContain(first);
    expect(listed).not.toContain(second!);
    const [firstId, secondId] = lines.slice(1).map((l) => l.split('\t')[0]);

    // "sk_" starts both prefixes: exit 1 listing both ids, nothing revoked.
    const ambiguous = await cli('client-revoke', ['rotating-shop', 'sk_'], env).catch(fail);
    expect(ambiguous).toMatchObject({ code: 1 });
    expect((ambiguous as { stderr: string }).stderr).toContain(firstId);
    expect((ambiguous as { stderr: string }).stderr).toContain(secondId);
    const unknown = await cli('client-revoke', ['rotating-shop', 'sk_nothing_like_it'], env).catch(fail);
    expect(unknown).toMatchObject({ code: 1 });
    expect(await cli('client-revoke', ['no-such-shop', firstId], env).catch(fail)).toMatchObject({ code: 1 });
    expect(await cli('client-rotate', ['no-such-shop'], env).catch(fail)).toMatchObject({ code: 1 });

    const { stdout: revoked } = await cli('client-revoke', ['rotating-shop', first.slice(0, 12)], env);
    expect(revoked).toContain(`revoked key ${firstId}`);
    const { stdout: after } = await cli('client-keys', ['rotating-shop'], env);
    const states = after.trim().split('\n').slice(1).map((l) => l.split('\t'));
    expect(states[0][3]).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(states[1][3]).toBe('-');
    // The app holds the revoked key until its next read of the active keys.
    await waitFor('the revoked key to be refused', async () => (await http().get('/orders').set('Authorization', `Bearer ${first}`)).status === 401, {
      intervalMs: 200,
    });
    await http().get('/orders').set('Authorization', `Bearer ${second!}`).expect(200);
  });

  it('migration:run reports the schema up to date, and migration:generate finds no difference from the entities', async () => {
    expect((await cli('migration', ['run'], env)).stdout).toMatch(/schema is up to date: CreateClients\d+, CreateIdempotencyKeys\d+, CreateOrdersPaymentsRefunds\d+/);
    expect((await cli('migration', ['generate', 'Drift'], env)).stdout).toContain('no changes: the entities match the schema');
  });

  it('purge removes expired keys, and events past their retention, and says how many', async () => {
    const pg = new Client({ connectionString: t.db.url });
    await pg.connect();
    try {
      const [{ id }] = (await pg.query<{ id: string }>("SELECT id FROM clients WHERE name = 'client-a'")).rows;
      await pg.query(
        `INSERT INTO idempotency_keys (id, fingerprint, lease, expires_at, status, body)
         SELECT ${keyIdSql('$1::text', "'expired-' || i")}, substring(sha256(i::text::bytea) FROM 1 FOR 16), 0, now() - interval '1 minute', 201, '{}'
           FROM generate_series(1, 7) AS i`,
        [id],
      );
      await pg.query(`INSERT INTO events (client_id, id, type, data) SELECT $1, 'evt_cli_' || i, 'order.created', '{}' FROM generate_series(1, 3) AS i`, [id]);
      await pg.query(`UPDATE events SET created_at = now() - interval '31 days' WHERE id LIKE 'evt_cli_%'`);
      const { stdout } = await cli('purge', [], env);
      const [keys, events, ...rest] = stdout.trim().split('\n');
      expect(keys).toMatch(/^purged 7 expired idempotency keys in \d+ ms$/);
      expect(events).toMatch(/^purged 3 events, 0 delivery attempts and 0 webhook dead letters in \d+ ms$/);
      expect(rest).toEqual([]);
      expect((await pg.query(`SELECT 1 FROM idempotency_keys WHERE ${keyIn()}`, [['1', '2', '3', '4', '5', '6', '7'].map((i) => `expired-${i}`)])).rowCount).toBe(0);
      expect((await pg.query(`SELECT 1 FROM events WHERE id LIKE 'evt_cli_%'`)).rowCount).toBe(0);
    } finally {
      await pg.end();
    }
  });

  describe('a command starts nothing beside its task', () => {
    const everythingAskedFor = (metricsPort: number) =>
      loadConfig({
        DATABASE_URL: t.db.url,
        METRICS_PORT: String(metricsPort),
        IDEMPOTENCY_JOBS: 'on',
        LOG_LEVEL: 'silent',
      });

    it('as a process: with METRICS_PORT taken and no CARD_NETWORK_URL, purge and migration:run succeed and bind nothing', async () => {
      const held = await holdPort();
      try {
        const commandEnv = { ...env, METRICS_PORT: String(held.port), IDEMPOTENCY_JOBS: 'on', CARD_NETWORK_URL: '' };
        const purged = await cli('purge', [], commandEnv);
        expect(purged.stdout).toMatch(/^purged \d+ expired idempotency keys/);
        const migrated = await cli('migration', ['run'], commandEnv);
        expect(migrated.stdout).toContain('schema is up to date');
        for (const { stderr } of [purged, migrated]) {
          expect(stderr).not.toMatch(/EADDRINUSE/);
          expect(stderr).not.toMatch(BACKGROUND);
        }
      } finally {
        held.server.close();
      }
    });

    it("in the command's context: no metrics listener, no recovery or purge job, no relay, no simulator (the server's context starts all five)", async () => {
      const held = await holdPort();
      let context: INestApplicationContext | undefined;
      try {
        const logger = new CapturingLogger();
        // The held port: a metrics listener would fail the boot.
        context = await createCommandContext(everythingAskedFor(held.port), t.db.url, logger);
        await context.close();
        context = undefined;
        expect(logger.lines.filter((l) => BACKGROUND.test(l))).toEqual([]);
      } finally {
        await context?.close();
        held.server.close();
      }

      // The control: the same configuration as a server logs each part it starts.
      const logger = new CapturingLogger();
      const server = await NestFactory.createApplicationContext(AppModule.register({ config: everythingAskedFor(await freePort()), databaseUrl: t.db.url }), { logger });
      await server.close();
      const started = logger.lines.filter((l) => BACKGROUND.test(l)).join('\n');
      expect(started).toContain('embedded card network simulator');
      expect(started).toContain('recovery of abandoned phased operations');
      expect(started).toContain('purge of events');
      expect(started).toContain('outbox relay started');
      expect(started).toContain('metrics on http');
    });
  });
});
