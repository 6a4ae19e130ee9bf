/**
 * The cost of encryption at rest per stored response and per replay read from
 * the database (ResponseCipher: AES-256-GCM, a fresh IV per seal), against the
 * plain path, for response bodies of the sizes the API answers. Prints one table;
 * a replay from the replay cache pays nothing (it keeps the opened response).
 * `npm run bench:encryption`.
 */
import { performance } from 'node:perf_hooks';
import { ResponseCipher } from '../packages/idempotency/src/contract/response-cipher';

const ROW = '0b9d3a3e-7d4f-4f7e-9d2a-6f1e8b0c2a11';
const ROUNDS = 20_000;

function body(bytes: number): string {
  const base = { id: '6f1e8b0c-2a11-4f7e-9d2a-0b9d3a3e7d4f', status: 'succeeded', amount: 3998, currency: 'usd', description: '' };
  base.description = 'x'.repeat(Math.max(0, bytes - JSON.stringify(base).length));
  return JSON.stringify(base);
}

function timeUs(work: () => void): number {
  for (let i = 0; i < 2_000; i++) work();
  const started = performance.now();
  for (let i = 0; i < ROUNDS; i++) work();
  return ((performance.now() - started) * 1000) / ROUNDS;
}

const plain = new ResponseCipher();
const sealedRing = new ResponseCipher([{ id: 'k1', key: Buffer.alloc(32, 1) }]);
console.log('| body | seal (plain) µs | seal (AES-256-GCM) µs | open on replay (plain) µs | open on replay (AES-256-GCM) µs | stored bytes plain / sealed |');
console.log('|---|---|---|---|---|---|');
for (const size of [300, 2_000, 16_000]) {
  const response = { status: 201, body: body(size), contentType: 'application/json; charset=utf-8', location: '/payments/6f1e8b0c' };
  const p = plain.seal(ROW, response);
  const s = sealedRing.seal(ROW, response);
  const row = [
    `${size} B`,
    timeUs(() => plain.seal(ROW, response)).toFixed(2),
    timeUs(() => sealedRing.seal(ROW, response)).toFixed(2),
    timeUs(() => plain.open(ROW, 201, p.body, p.headers)).toFixed(2),
    timeUs(() => sealedRing.open(ROW, 201, s.body, s.headers)).toFixed(2),
    `${p.body.length + (p.headers?.length ?? 0)} / ${s.body.length + (s.headers?.length ?? 0)}`,
  ];
  console.log(`| ${row.join(' | ')} |`);
}
