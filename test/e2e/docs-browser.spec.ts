import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import request from 'supertest';
import { CLIENT_A, TestApp, createTestApp } from '../support/app';
import { Ledger, reconcilePayment } from '../support/card-network';
import { CHROMIUM_MISSING, chromiumBinary, launchChromium } from '../support/chromium';
import { REPO_ROOT } from '../support/dist';
import { createOrder, paymentBody } from '../support/fixtures';
import { suitesNeeding } from '../support/tool-suites';

/**
 * The Swagger UI at /docs, used as a person would in a real browser (headless
 * Chromium, test/support/chromium.ts) against the app listening on a port:
 * authorize with an API key, try POST /payments with an Idempotency-Key, execute
 * it twice. The UI shows the second answer as the replay of the first
 * (`idempotent-replayed: true`), and one payment and one charge exist. The page
 * runs under the app's Content-Security-Policy, so a policy that blocks the UI
 * fails here. The last screen is kept as test-results/docs-browser/replayed.png.
 */
const SCREENSHOT = join(REPO_ROOT, 'test-results', 'docs-browser', 'replayed.png');

suitesNeeding('Browser suite', chromiumBinary() !== undefined, CHROMIUM_MISSING)('Swagger UI at /docs in Chromium (e2e)', () => {
  let t: TestApp;
  let browser: Browser;
  let page: Page;
  /** Console errors and uncaught exceptions of the page (a CSP violation is reported as one). */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    t = await createTestApp({ listen: true });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    // Every wait below ends well within jest's timeout, with Playwright's own message.
    page.setDefaultTimeout(20_000);
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });
  // A step that timed out says why when the page logged it (a CSP violation is logged there).
  afterEach(() => {
    if (pageErrors.length) console.error(`The page logged:\n${pageErrors.join('\n')}`);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('authorizes, executes POST /payments twice with one key: the second is shown replayed, one charge', async () => {
    const order = await createOrder(t);
    const description = `docs browser ${randomUUID()}`;
    const body = paymentBody({ amount: order.amount_total, currency: order.currency.toLowerCase(), order_id: order.id, description });
    const operation = await paymentsOperation(t);

    await page.goto(`${t.url}/docs`);
    await authorize(page, CLIENT_A.key);

    const op = page.locator(operation);
    await op.locator('.opblock-summary').click();
    await op.locator('.try-out__btn').click();
    await op.locator('tr[data-param-name="Idempotency-Key"][data-param-in="header"] input').fill(randomUUID());
    await op.locator('textarea.body-param__text').fill(JSON.stringify(body));

    const first = await execute(page, op);
    const second = await execute(page, op);

    expect(first.status).toBe(201);
    // The headers were read (so the absence below means something), and the first is not a replay.
    expect(first.headers['content-type']).toMatch(/^application\/json/);
    expect(first.headers).not.toHaveProperty('idempotent-replayed');
    expect(second.status).toBe(201);
    expect(second.headers).toMatchObject({ 'idempotent-replayed': 'true' });
    expect(second.body).toEqual(first.body);
    // The screen a person would look at: the server response of the second execution, its headers.
    await op.locator('.live-responses-table').scrollIntoViewIfNeeded();
    await page.screenshot({ path: SCREENSHOT });

    const paymentId = await reconcilePayment(t.dataSource, Ledger.of(t), description);
    expect(JSON.parse(first.body)).toMatchObject({ id: paymentId, order_id: order.id, status: 'succeeded' });
    const paid = await request(t.app.getHttpServer()).get(`/orders/${order.id}`).set(t.auth()).expect(200);
    expect(paid.body.status).toBe('paid');
    expect(pageErrors).toEqual([]);
  });
});

/** Swagger UI's element for POST /payments: `#operations-{tag}-{operationId}` from the served document. */
async function paymentsOperation(t: TestApp): Promise<string> {
  const doc = await request(t.app.getHttpServer()).get('/docs-json').expect(200);
  const { tags, operationId } = doc.body.paths['/payments'].post as { tags: string[]; operationId: string };
  return `#operations-${tags[0]}-${operationId}`;
}

/** The Authorize dialog: the bearer API key entered, the dialog closed, the padlock shown locked. */
async function authorize(page: Page, apiKey: string): Promise<void> {
  await page.locator('.auth-wrapper .btn.authorize').click();
  const dialog = page.locator('.dialog-ux .modal-ux');
  await dialog.locator('#auth-bearer-value').fill(apiKey);
  await dialog.locator('button.authorize').click();
  await dialog.locator('.btn-done').click();
  await dialog.waitFor({ state: 'detached' });
  await page.locator('.auth-wrapper .btn.authorize.locked').waitFor();
}

interface ShownResponse {
  status: number;
  /** The response headers as Swagger UI lists them (names in lower case). */
  headers: Record<string, string>;
  body: string;
}

/**
 * Clicks Execute and reads the answer Swagger UI shows for that request: it is
 * the shown one once the headers block carries the X-Request-Id of the
 * response the browser received.
 */
async function execute(page: Page, op: Locator): Promise<ShownResponse> {
  const [response] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/payments'),
    op.locator('button.execute').click(),
  ]);
  const requestId = await response.headerValue('x-request-id');
  expect(requestId).toBeTruthy();
  const live = op.locator('.responses-wrapper .live-responses-table');
  const headersBlock = live.locator('div:has(> h5:text-is("Response headers")) > pre');
  await headersBlock.filter({ hasText: `x-request-id: ${requestId}` }).waitFor();
  const headers = Object.fromEntries(
    (await headersBlock.locator('.headerline').allInnerTexts()).map((line) => {
      const at = line.indexOf(':');
      return [line.slice(0, at).trim(), line.slice(at + 1).trim()];
    }),
  );
  const status = Number(await live.locator('.response .response-col_status').innerText());
  const body = await live.locator('div:has(> h5:text-is("Response body")) pre').innerText();
  return { status, headers, body };
}
