import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConformanceReport, main } from '../src';
import { ReferenceServer, startReferenceServer } from './reference-server';

/** The command line: exit codes, the table on stdout and the JSON report. */
let dir: string;
let server: ReferenceServer | undefined;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'conformance-cli-'));
});
afterAll(async () => {
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, { out: (t) => (out += t), err: (t) => (err += t) });
  return { code, out, err };
}

const target = (url: string) => ['--base-url', url, '--route', '/things', '--body', '{"tag":"{{unique}}"}', '--effects-url', `${url}/effects?tag={{unique}}`];

it('exits 2 with the usage on missing or contradictory options', async () => {
  expect(await run(['--base-url', 'http://127.0.0.1:1'])).toMatchObject({ code: 2, err: expect.stringContaining('--body are required') });
  const both = await run([...target('http://127.0.0.1:1'), '--effects-sql', 'SELECT 1', '--database-url', 'postgres://x']);
  expect(both).toMatchObject({ code: 2, err: expect.stringContaining('one way to count effects') });
  const noPlaceholder = await run(['--base-url', 'http://127.0.0.1:1', '--route', '/things', '--body', '{}', '--effects-url', 'http://127.0.0.1:1/']);
  expect(noPlaceholder).toMatchObject({ code: 2, err: expect.stringContaining('{{unique}}') });
});

it('prints the table, writes the JSON report and exits 1 when a check fails', async () => {
  server = await startReferenceServer({ flaw: 'no-replayed-header', delayMs: 0 });
  const json = join(dir, 'report.json');
  const { code, out } = await run([...target(server.url), '--json', json]);
  expect(code).toBe(1);
  expect(out).toMatch(/^\| replayed-header \| fail \| .* \| the replay has Idempotent-Replayed: \(none\) \|$/m);
  expect(out).toMatch(/^\d+ pass, 1 fail, \d+ not applicable$/m);
  const report = JSON.parse(await readFile(json, 'utf8')) as ConformanceReport;
  expect(Object.fromEntries(report.results.map((r) => [r.id, r.outcome]))).toMatchObject({ 'replayed-header': 'fail', scope: 'n/a', 'replay-fidelity': 'pass' });
});

it('fails every check, without crashing, when nothing answers', async () => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise((r) => closed.close(r));
  const json = join(dir, 'down.json');
  const { code } = await run([...target(url), '--json', json]);
  expect(code).toBe(1);
  const report = JSON.parse(await readFile(json, 'utf8')) as ConformanceReport;
  expect(report.results.filter((r) => r.id !== 'scope').every((r) => r.outcome === 'fail' && r.reason.includes('ECONNREFUSED'))).toBe(true);
});
