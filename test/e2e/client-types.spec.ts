import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { PAYMENT_STATUSES } from '../../src/payments/payment.entity';
import { REFUND_STATUSES } from '../../src/payments/refund.entity';
import { TestApp, createTestApp } from '../support/app';

const ROOT = join(__dirname, '..', '..');
const GENERATOR = join(ROOT, 'scripts', 'openapi-client-types.mjs');
const GENERATED = join(ROOT, 'src', 'client', 'api.generated.ts');

/** clientTypes() of the generator, through its CLI: jest runs CommonJS and cannot load the .mjs. */
function clientTypes(document: unknown): string {
  return execFileSync(process.execPath, [GENERATOR, '-', '-'], { input: JSON.stringify(document), encoding: 'utf8' });
}

/** Where two texts first differ, as a line of each. */
function firstDifference(expected: string, actual: string): string {
  const a = expected.split('\n');
  const b = actual.split('\n');
  const line = a.findIndex((text, i) => text !== b[i]);
  const at = line < 0 ? a.length : line;
  return `line ${at + 1}:\n  generated: ${JSON.stringify(a[at] ?? '(end of file)')}\n  committed: ${JSON.stringify(b[at] ?? '(end of file)')}`;
}

/**
 * The client's types (src/client/api.generated.ts) are generated from the OpenAPI
 * document the server serves, itself built from the DTOs: this fails as soon as
 * a DTO changes and the committed file does not. `npm run client:types` runs this
 * file with UPDATE_CLIENT_TYPES=1, which writes the file instead of failing.
 */
describe('Client types generated from the OpenAPI document (e2e)', () => {
  let t: TestApp;
  let document: { components: { schemas: Record<string, { properties: Record<string, { enum?: unknown[] }>; required?: string[] }> } };

  beforeAll(async () => {
    t = await createTestApp();
    document = (await request(t.app.getHttpServer()).get('/docs-json').expect(200)).body;
  });
  afterAll(() => t.close());

  it('src/client/api.generated.ts is what the served document generates, byte for byte', () => {
    const generated = clientTypes(document);
    if (process.env.UPDATE_CLIENT_TYPES === '1') writeFileSync(GENERATED, generated);
    const committed = existsSync(GENERATED) ? readFileSync(GENERATED, 'utf8') : '';
    if (committed !== generated) {
      throw new Error(`src/client/api.generated.ts does not match the OpenAPI document: run npm run client:types\n${firstDifference(generated, committed)}`);
    }
  });

  it('documents every payment and refund status the server stores', () => {
    const { PaymentResponse, RefundResponse } = document.components.schemas;
    expect(PaymentResponse.properties.status.enum).toEqual([...PAYMENT_STATUSES]);
    expect(RefundResponse.properties.status.enum).toEqual([...REFUND_STATUSES]);
    expect(RefundResponse.required).toContain('status');
  });
});
