import { httpEffects, runConformance, ConformanceReport } from '../src';
import { Flaw, ReferenceServer, startReferenceServer } from './reference-server';

/**
 * The kit passes a correct server whole, and each planted flaw fails exactly
 * the check that stands for it (and the checks it necessarily breaks), so a
 * "pass" from the kit means something.
 */
const CLIENTS = [['Authorization', 'Bearer client-a'], ['Authorization', 'Bearer client-b']] as const;
/** Slow enough for the duplicate, sent 50 ms after the original, to find it in flight. */
const SLOW_MS = 250;

async function check(server: ReferenceServer): Promise<ConformanceReport> {
  const effects = httpEffects(server.effectsUrl);
  return runConformance({
    target: { baseUrl: server.url, route: '/things', method: 'POST', bodyTemplate: '{"tag":"{{unique}}"}', clients: [...CLIENTS] },
    effects,
    concurrency: 10,
  });
}

const outcomes = (report: ConformanceReport) => Object.fromEntries(report.results.map((r) => [r.id, r.outcome]));
const failed = (report: ConformanceReport) => report.results.filter((r) => r.outcome === 'fail').map((r) => r.id);

let servers: ReferenceServer[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});

async function against(flaw: Flaw | undefined, delayMs = SLOW_MS): Promise<ConformanceReport> {
  const server = await startReferenceServer({ flaw, delayMs });
  servers.push(server);
  return check(server);
}

it('passes a correct server on every check', async () => {
  const report = await against(undefined);
  expect(outcomes(report)).toEqual(Object.fromEntries(report.results.map((r) => [r.id, 'pass'])));
  expect(report.results).toHaveLength(10);
});

it('never fails a correct server that is too fast for the in-flight check', async () => {
  const report = await against(undefined, 0);
  const inFlight = report.results.find((r) => r.id === 'in-flight')!;
  // Usually "not observed"; on a busy machine the original can still be running when the duplicate comes.
  if (inFlight.outcome === 'n/a') expect(inFlight.reason).toMatch(/^not observed: the original took \d+ ms/);
  else expect(inFlight.outcome).toBe('pass');
  expect(report.failed).toBe(0);
});

const FLAWS: [Flaw, string[]][] = [
  ['key-optional', ['missing-key']],
  ['quoted-literal', ['quoted-is-bare']],
  ['no-replayed-header', ['replayed-header']],
  ['no-fingerprint', ['other-body']],
  ['no-retry-after', ['in-flight']],
  ['queue', ['in-flight']],
  ['shared-scope', ['scope']],
  ['ignore-key', ['missing-key', 'quoted-key', 'bare-key', 'quoted-is-bare', 'replay-fidelity', 'replayed-header', 'other-body', 'in-flight', 'concurrent']],
];

it.each(FLAWS)('fails a server with the flaw %s on %j', async (flaw, expected) => {
  const report = await against(flaw);
  expect(failed(report)).toEqual(expected);
  expect(report.notApplicable).toBe(0);
});

it('fails a check-then-act server on the concurrency check', async () => {
  const report = await against('check-then-act');
  expect(failed(report)).toContain('concurrent');
  expect(report.results.find((r) => r.id === 'concurrent')!.reason).toMatch(/\d+ effects$/);
});
