import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConformanceReport, main } from '../../packages/conformance/src';
import { CLIENT_A, CLIENT_B, TestApp, createTestApp } from '../support/app';

/**
 * The conformance kit's command line against the service, black-box: POST
 * /payments with two API clients, effects counted in the payments table. The
 * card network answers after 500 ms so the duplicate of the in-flight check
 * finds the original still running. Every check must pass.
 */
let t: TestApp;
let dir: string;

beforeAll(async () => {
  t = await createTestApp({ listen: true, env: { CARD_NETWORK_DELAY: '500ms' } });
  dir = await mkdtemp(join(tmpdir(), 'conformance-'));
});

afterAll(async () => {
  await t?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

it('passes every check on POST /payments', async () => {
  let table = '';
  const json = join(dir, 'report.json');
  const code = await main(
    [
      '--base-url', t.url!,
      '--route', '/payments',
      '--body', '{"amount":1000,"currency":"usd","source":"tok_visa","description":"conformance {{unique}}"}',
      '--client', `Authorization: Bearer ${CLIENT_A.key}`,
      '--client', `Authorization: Bearer ${CLIENT_B.key}`,
      '--effects-sql', "SELECT count(*) FROM payments WHERE description = 'conformance ' || $1",
      '--database-url', t.db.url,
      '--json', json,
    ],
    { out: (text) => (table += text), err: (text) => (table += text) },
  );
  const report = JSON.parse(await readFile(json, 'utf8')) as ConformanceReport;
  expect(report.results.filter((r) => r.outcome !== 'pass')).toEqual([]);
  expect(report.results).toHaveLength(10);
  expect(code).toBe(0);
  expect(table).toContain('10 pass, 0 fail, 0 not applicable');
});
