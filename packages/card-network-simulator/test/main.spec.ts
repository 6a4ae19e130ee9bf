import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Stripe from 'stripe';
import { call, receivers, VISA, waitFor } from './support';

/**
 * main.ts as a real process, compiled by tsc into a folder of its own (not
 * dist/, which the package's build wipes while other suites may be running from it).
 */
const ROOT = resolve(__dirname, '..');
let outDir: string;
let mainJs: string;

beforeAll(() => {
  outDir = mkdtempSync(join(tmpdir(), 'card-network-main-'));
  execFileSync(
    process.execPath,
    [
      require.resolve('typescript/bin/tsc'),
      '--ignoreConfig',
      '--outDir', outDir,
      '--rootDir', join(ROOT, 'src'),
      '--module', 'node20',
      '--moduleResolution', 'node16',
      '--target', 'es2023',
      '--types', 'node',
      '--strict',
      '--skipLibCheck',
      join(ROOT, 'src/main.ts'),
    ],
    { cwd: ROOT, stdio: 'pipe' },
  );
  writeFileSync(join(outDir, 'package.json'), '{"type":"commonjs"}\n');
  mainJs = join(outDir, 'main.js');
}, 60_000);

afterAll(() => rmSync(outDir, { recursive: true, force: true }));

interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

function run(env: Record<string, string>): Started {
  const child = spawn(process.execPath, [mainJs], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, stdout: () => out, stderr: () => err, exit };
}

function readyUrl(started: Started, timeoutMs = 10_000): Promise<string> {
  return new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line; stderr: ${started.stderr()}`)), timeoutMs);
    const check = () => {
      const match = /^card network simulator listening on (http:\/\/127\.0\.0\.1:\d+)\n/.exec(started.stdout());
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]);
      }
    };
    started.child.stdout!.on('data', check);
    void started.exit.then(() => {
      clearTimeout(timer);
      reject(new Error(`exited before ready; stderr: ${started.stderr()}`));
    });
  });
}

describe('card network simulator: main.ts as a process', () => {
  it('prints one ready line, serves the configured secrets with the configured delay, exits 0 on SIGTERM', async () => {
    const secrets = ['sk_test_first_account_00001111', 'sk_test_second_account_22223333'];
    const started = run({ CARD_NETWORK_PORT: '0', CARD_NETWORK_SECRET: secrets.join(','), CARD_NETWORK_DELAY: '200ms' });
    try {
      const url = await readyUrl(started);
      const t0 = performance.now();
      const res = await call(url, { path: '/v1/payment_intents', secret: secrets[1], key: 'main-1', form: VISA });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
      expect(res.status).toBe(200);
      expect(res.json()).toMatchObject({ object: 'payment_intent', status: 'succeeded' });
      expect((await call(url, { path: '/v1/payment_intents', secret: 'sk_test_simulator_0123456789abcdef' })).status).toBe(401);

      started.child.kill('SIGTERM');
      expect(await started.exit).toBe(0);
      expect(started.stdout().split('\n').filter(Boolean)).toHaveLength(1);
      for (const secret of secrets) expect(started.stdout() + started.stderr()).not.toContain(secret);
    } finally {
      started.child.kill('SIGKILL');
    }
  });

  it('uses the default secret and exits 0 on SIGINT', async () => {
    const started = run({ CARD_NETWORK_PORT: '0' });
    try {
      const url = await readyUrl(started);
      expect((await call(url, { path: '/v1/payment_intents', secret: 'sk_test_simulator_0123456789abcdef' })).status).toBe(200);
      started.child.kill('SIGINT');
      expect(await started.exit).toBe(0);
    } finally {
      started.child.kill('SIGKILL');
    }
  });

  it('refuses a bad duration with exit 1 and no ready line', async () => {
    const started = run({ CARD_NETWORK_PORT: '0', CARD_NETWORK_DELAY: 'soon' });
    expect(await started.exit).toBe(1);
    expect(started.stdout()).toBe('');
    expect(started.stderr()).toContain('CARD_NETWORK_DELAY');
  });

  describe('webhooks', () => {
    const receiver = receivers();

    it('delivers signed events to CARD_NETWORK_WEBHOOK_URL; CARD_NETWORK_PROCESSING_DELAY sets when processing ends', async () => {
      const endpoint = await receiver();
      const secret = 'whsec_main_process_secret';
      const started = run({
        CARD_NETWORK_PORT: '0',
        CARD_NETWORK_DELAY: '0ms',
        CARD_NETWORK_PROCESSING_DELAY: '100ms',
        CARD_NETWORK_WEBHOOK_URL: endpoint.url,
        CARD_NETWORK_WEBHOOK_SECRET: secret,
      });
      try {
        const url = await readyUrl(started);
        const res = await call(url, { path: '/v1/payment_intents', secret: 'sk_test_simulator_0123456789abcdef', form: { ...VISA, payment_method: 'pm_card_chargeProcessing' } });
        expect(res.json()).toMatchObject({ status: 'processing' });
        await waitFor(() => endpoint.deliveries.length === 2, () => endpoint.deliveries.length);
        const stripe = new Stripe('sk_test_x');
        const types = endpoint.deliveries.map((d) => stripe.webhooks.constructEvent(d.payload, d.headers['stripe-signature']!, secret).type);
        expect(types.sort()).toEqual(['payment_intent.processing', 'payment_intent.succeeded']);
        expect(started.stdout() + started.stderr()).not.toContain(secret);
        started.child.kill('SIGTERM');
        expect(await started.exit).toBe(0);
      } finally {
        started.child.kill('SIGKILL');
      }
    });

    it('refuses a webhook URL without its secret, or a bad URL, with exit 1 and one line', async () => {
      for (const [env, expected] of [
        [{ CARD_NETWORK_WEBHOOK_URL: 'http://127.0.0.1:9/hook' }, 'card network simulator: CARD_NETWORK_WEBHOOK_SECRET: required when CARD_NETWORK_WEBHOOK_URL is set\n'],
        [{ CARD_NETWORK_WEBHOOK_URL: 'not a url', CARD_NETWORK_WEBHOOK_SECRET: 'whsec_x' }, 'card network simulator: CARD_NETWORK_WEBHOOK_URL: not a URL: not a url\n'],
      ] as const) {
        const started = run({ CARD_NETWORK_PORT: '0', ...env });
        expect(await started.exit).toBe(1);
        expect(started.stdout()).toBe('');
        expect(started.stderr()).toBe(expected);
      }
    });
  });
});
