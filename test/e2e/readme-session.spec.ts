import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TestApp, createTestApp } from '../support/app';

/**
 * The README's worked session runs as written: its shell blocks, in order, in one bash,
 * against the app started with the README's API_KEYS (the app listens on a free port, which
 * is the one substitution: `localhost:3000`). Each `# …` line under a command is an answer
 * the README shows; each must appear in that block's output, in order, with `…` standing for
 * anything on the line (an id shown as its first hex digits and `…` stands for the whole id).
 */
const README = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');

function sessionBlocks(): string[] {
  const start = README.indexOf('## A worked session with curl');
  const end = README.indexOf('\n## ', start + 1);
  expect(start).toBeGreaterThanOrEqual(0);
  return [...README.slice(start, end).matchAll(/^```sh\n([\s\S]*?)^```/gm)].map((m) => m[1]);
}

/** The answers a block shows, as patterns to find in order. */
function shownAnswers(block: string): RegExp[] {
  return block
    .split('\n')
    .filter((line) => line.startsWith('# '))
    .map((line) => line.slice(2).replace(/\s+<- .*$/, ''))
    .map((shown) => {
      const parts = shown.split(/[0-9a-f]{8}-…|…/);
      const gaps = [...shown.matchAll(/[0-9a-f]{8}-…|…/g)].map((m) => (m[0] === '…' ? '[^\\n]*?' : '[0-9a-f-]{36}'));
      const escaped = parts.map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      return new RegExp(escaped.map((p, i) => p + (gaps[i] ?? '')).join(''), 'i');
    });
}

describe('The README session (e2e)', () => {
  let t: TestApp;
  const [startBlock, ...blocks] = sessionBlocks();
  const apiKeys = /^API_KEYS=(\S+) npm start$/m.exec(startBlock)?.[1];

  beforeAll(async () => {
    expect(apiKeys).toBeDefined();
    t = await createTestApp({ listen: true, env: { API_KEYS: apiKeys! } });
  });
  afterAll(() => t?.close());

  it('answers each command as the README shows', async () => {
    const host = new URL(t.url!).host;
    const marker = (i: number) => `@@block ${i}@@`;
    const script = ['set -euo pipefail', ...blocks.flatMap((block, i) => [`echo '${marker(i)}'`, block.replaceAll('localhost:3000', host)])].join('\n');
    // Asynchronous: the app answers from this process.
    const { stdout: output } = await promisify(execFile)('bash', ['-c', script], { encoding: 'utf8', timeout: 30_000 });
    const problems: string[] = [];
    blocks.forEach((block, i) => {
      const from = output.indexOf(marker(i));
      const to = i + 1 < blocks.length ? output.indexOf(marker(i + 1)) : output.length;
      let text = output.slice(from, to);
      for (const pattern of shownAnswers(block)) {
        const found = pattern.exec(text);
        if (!found) {
          problems.push(`block ${i + 1}: ${pattern.source} not in:\n${text}`);
          break;
        }
        text = text.slice(found.index + found[0].length);
      }
    });
    expect(problems).toEqual([]);
    expect(blocks.flatMap(shownAnswers).length).toBeGreaterThan(5);
  });

  it('finds a wrong answer (the check can fail)', () => {
    const [pattern] = shownAnswers('# HTTP/1.1 201 Created\n');
    expect(pattern.test('HTTP/1.1 409 Conflict')).toBe(false);
    const [id] = shownAnswers('# {"id":"adda8173-…","status":"pending"}');
    expect(id.test('{"id":"f5746826-9e1b-4268-8699-b1b33ffd9f58","status":"pending"}')).toBe(true);
    expect(id.test('{"id":"f5746826-9e1b-4268-8699-b1b33ffd9f58","status":"paid"}')).toBe(false);
  });
});
