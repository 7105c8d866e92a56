// Drives skilld's web inbox in Debian's headless chromium, as a person would:
// opens /ui, finds a pending approval, reads its command preview, clicks
// "Approve once" (or another decision) and waits for the run to end in the
// expected status. Run by tests/it/ui.rs.
//
//   node tests/browser/inbox.mjs <base_url> [token]
//
// With a token, the page is first opened without one: it must show the 401
// message; the token is then typed into the page's token field and saved.
//
// What to do and expect comes from the environment:
//   INBOX_APPROVAL_ID    the approval to decide (required)
//   INBOX_PREVIEW        the exact command preview text (optional)
//   INBOX_ACTION         the button to click (default "Approve once")
//   INBOX_NOTE           a note to type before clicking (optional)
//   INBOX_STATUS         the run's final status (default "succeeded")
//   INBOX_OUTPUT         text the run's output must contain (optional)
//   INBOX_WEAK_TOKEN     a token that may see but not decide: tried first,
//                        the page must show the 403 and leave the request
//   INBOX_SCREENSHOT     a PNG path for the final page; "-pending" is added
//                        to the name for the page before the click (optional)
//   CHROMIUM             the browser (default /usr/bin/chromium)
//
// Prints one JSON line on success ({"run_id","preview","output",...}) and
// exits 0; on failure prints why (and the page's text) and exits 1.

import { chromium } from 'playwright-core';

// Generous: CI runs this beside the whole suite on two cores.
const TIMEOUT_MS = 45_000;

const [baseArg, token] = process.argv.slice(2);
const approvalId = process.env.INBOX_APPROVAL_ID;
if (!baseArg || !approvalId) {
  console.error('usage: INBOX_APPROVAL_ID=<id> node inbox.mjs <base_url> [token]');
  process.exit(2);
}
const base = baseArg.replace(/\/+$/, '');

function fail(message) {
  throw new Error(message);
}

/** Types a token into the page's field and saves it, as a person would. */
async function useToken(value) {
  await page.getByLabel('API token').fill(value);
  await page.getByRole('button', { name: 'Save token', exact: true }).click();
  await page.locator('#notice').waitFor({ state: 'hidden' });
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  // Root in a container has no user namespace for chromium's sandbox.
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
  timeout: 60_000,
});
let page;
const problems = [];
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT_MS);
  // A script error or a CSP violation is a bug of the page, even when the
  // flow below happens to complete.
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/status of 40[13]/.test(msg.text())) problems.push(`console error: ${msg.text()}`);
  });

  const response = await page.goto(`${base}/ui`);
  if (!response || response.status() !== 200) fail(`GET /ui answered ${response && response.status()}`);

  if (token) {
    const alert = page.locator('#notice');
    await alert.filter({ hasText: 'Unauthorized (401)' }).waitFor();
    const text = (await alert.textContent()) || '';
    if (!/requires an API token/.test(text)) fail(`the 401 notice does not say a token is needed: ${text}`);
    if ((await page.locator('article[data-approval-id]').count()) !== 0) fail('approvals are shown without a token');
  }

  const article = page.locator(`article[data-approval-id="${approvalId}"]`);
  const action = process.env.INBOX_ACTION || 'Approve once';

  if (process.env.INBOX_WEAK_TOKEN) {
    await useToken(process.env.INBOX_WEAK_TOKEN);
    await article.waitFor();
    await article.getByRole('button', { name: action, exact: true }).click();
    const error = article.locator('.action-error');
    await error.filter({ hasText: 'Forbidden (403)' }).waitFor();
    // The request is still there to be decided by someone who may.
    await page.waitForTimeout(300);
    if ((await article.count()) !== 1) fail('a refused decision removed the request');
  }
  if (token) await useToken(token);

  await article.waitFor();
  if ((await article.getByRole('heading').count()) < 1) fail('the approval has no heading');
  const runId = await article.getAttribute('data-run-id');
  const preview = ((await article.locator('pre.argv').textContent()) || '').trim();
  if (process.env.INBOX_PREVIEW !== undefined && preview !== process.env.INBOX_PREVIEW) {
    fail(`command preview is ${JSON.stringify(preview)}, expected ${JSON.stringify(process.env.INBOX_PREVIEW)}`);
  }
  const warning = (await article.locator('.warning').count()) ? await article.locator('.warning').textContent() : null;
  const shot = process.env.INBOX_SCREENSHOT;
  if (shot) await page.screenshot({ path: shot.replace(/(\.png)?$/, '-pending.png'), fullPage: true });

  if (process.env.INBOX_NOTE) await article.getByLabel(/^Note for /).fill(process.env.INBOX_NOTE);
  await article.getByRole('button', { name: action, exact: true }).click();
  await article.waitFor({ state: 'detached' });

  const status = process.env.INBOX_STATUS || 'succeeded';
  const row = page.locator(`tr[data-run-id="${runId}"]`);
  await page.locator(`tr[data-run-id="${runId}"][data-status="${status}"]`).waitFor();
  const output = (await row.locator('.output').count()) ? (await row.locator('.output').textContent()) || '' : null;
  if (process.env.INBOX_OUTPUT !== undefined && !(output || '').includes(process.env.INBOX_OUTPUT)) {
    fail(`run output ${JSON.stringify(output)} does not contain ${JSON.stringify(process.env.INBOX_OUTPUT)}`);
  }
  const exitCode = (await row.locator('.exit-code').count()) ? ((await row.locator('.exit-code').textContent()) || '').trim() : null;

  if (shot) await page.screenshot({ path: shot, fullPage: true });
  if (problems.length) fail(problems.join('\n'));
  console.log(JSON.stringify({ run_id: runId, status, preview, warning, output, exit_code: exitCode }));
} catch (err) {
  console.error(`inbox test failed: ${err.message}`);
  if (problems.length) console.error(problems.join('\n'));
  if (page) {
    const text = await page.locator('body').innerText().catch(() => '(page text unavailable)');
    console.error(`--- page text ---\n${text}`);
    if (process.env.INBOX_SCREENSHOT) await page.screenshot({ path: process.env.INBOX_SCREENSHOT, fullPage: true }).catch(() => {});
  }
  process.exitCode = 1;
} finally {
  await browser.close();
}
