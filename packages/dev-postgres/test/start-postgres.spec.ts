import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { DevPostgres, binDirOnPath, postgresOsUser, startPostgres } from '../src';

/**
 * The launcher on real servers: a temporary cluster (stop, start, destroy), a
 * kept one found again, a private folder (as root), a server binary folder of
 * the machine's, and a streaming replica.
 */
jest.setTimeout(120_000);

async function query<T>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as T[];
  } finally {
    await client.end();
  }
}

const started: DevPostgres[] = [];
async function start(...args: Parameters<typeof startPostgres>): Promise<DevPostgres> {
  const pg = await startPostgres(...args);
  started.push(pg);
  return pg;
}
afterAll(async () => {
  for (const pg of started.reverse()) await pg.destroy().catch(() => undefined);
});

describe('startPostgres', () => {
  it('a temporary cluster: random password, 127.0.0.1 only, data kept across stop and start, removed by destroy', async () => {
    const pg = await start({ database: 'app' });
    const url = new URL(pg.url());
    expect(url.pathname).toBe('/app');
    expect(url.hostname).toBe('127.0.0.1');
    expect(decodeURIComponent(url.password)).toMatch(/^[\w-]{43}$/);
    await expect(query(pg.url().replace(url.password, 'postgres'), 'SELECT 1')).rejects.toThrow(/password authentication failed/);
    const [settings] = await query<{ fsync: string; sockets: string }>(pg.url(), "SELECT current_setting('fsync') AS fsync, current_setting('unix_socket_directories') AS sockets");
    expect(settings).toEqual({ fsync: 'off', sockets: '' });

    await query(pg.url(), 'CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)');
    await pg.stop();
    expect(pg.isRunning()).toBe(false);
    await expect(query(pg.url(), 'SELECT 1')).rejects.toThrow(/ECONNREFUSED/);
    await pg.start();
    expect(await query(pg.url(), 'SELECT n FROM kept')).toEqual([{ n: 7 }]);

    await pg.destroy();
    expect(existsSync(pg.dataDir)).toBe(false);
    expect(existsSync(`${pg.dataDir}.password`)).toBe(false);
  });

  // A second start beside a live owner (refused, or attached to) needs another process: test/e2e/embedded-postgres.spec.ts.
  it('a kept cluster: its password file (0600) and data are found again by the next start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dev-postgres-spec-'));
    chmodSync(dir, 0o755); // the postgres user (as whom the server runs when we are root) enters it
    try {
      const dataDir = join(dir, 'pg');
      const first = await startPostgres({ dataDir, database: 'app' });
      expect(statSync(`${dataDir}.password`).mode & 0o777).toBe(0o600);
      expect(existsSync(`${dataDir}.owner`)).toBe(true);
      await query(first.url(), 'CREATE TABLE kept (n int); INSERT INTO kept VALUES (8)');
      await first.stop();
      expect(existsSync(`${dataDir}.owner`)).toBe(false);

      const second = await start({ dataDir, database: 'app' });
      expect(second.url()).not.toBe(first.url()); // another free port, the same password
      expect(new URL(second.url()).password).toBe(new URL(first.url()).password);
      expect(await query(second.url(), 'SELECT n FROM kept')).toEqual([{ n: 8 }]);
      const [{ fsync }] = await query<{ fsync: string }>(second.url(), "SELECT current_setting('fsync') AS fsync");
      expect(fsync).toBe('on');
      await second.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  (userInfo().uid === 0 ? it : it.skip)('as root, data asked for in a folder only root may enter lives where the postgres user can', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dev-postgres-private-')); // 0700, root's
    try {
      const pg = await start({ dataDir: join(dir, 'pg') });
      expect(pg.dataDir.startsWith(dir)).toBe(false);
      expect(statSync(pg.dataDir).uid).toBe(postgresOsUser()!.uid);
      expect(statSync(dir).mode & 0o777).toBe(0o700); // never opened up
      expect(await query(pg.url(), 'SELECT 1 AS one')).toEqual([{ one: 1 }]);
      await pg.destroy();
      expect(existsSync(pg.dataDir)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const onPath = binDirOnPath();
  (onPath ? it : it.skip)(`runs the server binaries it is given (the PostgreSQL on PATH: ${onPath ?? 'none'})`, async () => {
    const version = /\(PostgreSQL\) (\S+)/.exec(execFileSync(join(onPath!, 'postgres'), ['--version'], { encoding: 'utf8' }))![1];
    const pg = await start({ binDir: onPath });
    const [row] = await query<{ version: string }>(pg.url(), "SELECT current_setting('server_version') AS version");
    expect(row.version.split(' ')[0]).toBe(version);
  });

  it('a streaming replica: a hot standby that shows the primary’s commits once caught up, restarted with it', async () => {
    const pg = await start({ replica: { applyDelay: '200ms' } });
    const replica = pg.replica!;
    expect(replica.port).not.toBe(pg.port);
    const url = await pg.createDatabase('shop');
    await query(url, 'CREATE TABLE t (n int); INSERT INTO t VALUES (1)');
    await replica.caughtUp();
    expect(await query(replica.url('shop'), 'SELECT pg_is_in_recovery() AS standby, n FROM t')).toEqual([{ standby: true, n: 1 }]);
    await expect(query(replica.url('shop'), 'INSERT INTO t VALUES (2)')).rejects.toThrow(/read-only transaction/);

    await pg.stop();
    await pg.start();
    await query(url, 'INSERT INTO t VALUES (3)');
    await replica.caughtUp();
    expect(await query(replica.url('shop'), 'SELECT n FROM t ORDER BY n')).toEqual([{ n: 1 }, { n: 3 }]);
  });
});
