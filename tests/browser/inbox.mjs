// Drives skilld's web inbox in Debian's headless chromium, as a person would:
// opens /ui, finds a pending approval, opens its details, reads its command
// preview, clicks "Approve once" (or another decision, confirming a
// standing one in the page's dialog) and waits for the run to end in the
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
//   INBOX_PENDING        how many pending requests the page must count
//                        before the click (optional)
//   INBOX_WEAK_TOKEN     a token that may see but not decide: tried first,
//                        the page must show the 403 and leave the request
//   INBOX_SCREENSHOT     a PNG path for the final page; "-pending" is added
//                        to the name for the page before the click (optional)
//   CHROMIUM             the browser (default /usr/bin/chromium)
//
// Prints one JSON line on success ({"step":"done","run_id","preview",...})
// and exits 0; on failure prints why (and the page's text) and exits 1.

import { cardOf, drive, expand, fail, shoot } from './lib.mjs';

const token = process.argv[3];
const approvalId = process.env.INBOX_APPROVAL_ID || fail('INBOX_APPROVAL_ID is required');
const action = process.env.INBOX_ACTION || 'Approve once';

/** Types a token into the page's field and saves it, as a person would. */
async function useToken(page, value) {
  await page.getByLabel('API token').fill(value);
  await page.getByRole('button', { name: 'Save token', exact: true }).click();
  await page.locator('#notice').waitFor({ state: 'hidden' });
}

/** Clicks the decision; a standing one is confirmed in the page's dialog. */
async function decide(page, article) {
  await article.getByRole('button', { name: action, exact: true }).click();
  if (!/always/.test(action)) return;
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  await dialog.getByRole('button', { name: action, exact: true }).click();
}

async function withoutToken(page, article) {
  const alert = page.locator('#notice');
  await alert.filter({ hasText: 'Unauthorized (401)' }).waitFor();
  const text = (await alert.textContent()) || '';
  if (!/requires an API token/.test(text)) fail(`the 401 notice does not say a token is needed: ${text}`);
  if ((await page.locator('article[data-approval-id]').count()) !== 0) fail('approvals are shown without a token');
  if (await article.count()) fail('the request is shown without a token');
}

/** A token that may see but not decide: its click is refused and the request stays. */
async function withWeakToken(page, article, weak) {
  await useToken(page, weak);
  await article.waitFor();
  await expand(article);
  await decide(page, article);
  await article.locator('.action-error').filter({ hasText: 'Forbidden (403)' }).waitFor();
  if ((await article.count()) !== 1) fail('a refused decision removed the request');
}

/** Waits for the inbox to count `n` pending requests. */
async function counted(page, n) {
  const count = page.locator('#approvals-count');
  await count.filter({ hasText: `(${n})` }).waitFor();
  const cards = await page.locator('article[data-approval-id]').count();
  if (String(cards) !== n) fail(`the page counts ${n} pending requests but shows ${cards} cards`);
}

async function runOutcome(page, runId) {
  const status = process.env.INBOX_STATUS || 'succeeded';
  const row = page.locator(`tr[data-run-id="${runId}"]`);
  await page.locator(`tr[data-run-id="${runId}"][data-status="${status}"]`).waitFor();
  const output = (await row.locator('.output').count()) ? (await row.locator('.output').textContent()) || '' : null;
  if (process.env.INBOX_OUTPUT !== undefined && !(output || '').includes(process.env.INBOX_OUTPUT)) {
    fail(`run output ${JSON.stringify(output)} does not contain ${JSON.stringify(process.env.INBOX_OUTPUT)}`);
  }
  const exitCode = (await row.locator('.exit-code').count()) ? ((await row.locator('.exit-code').textContent()) || '').trim() : null;
  return { status, output, exit_code: exitCode };
}

await drive(async (page) => {
  const article = cardOf(page, approvalId);
  if (token) await withoutToken(page, article);
  if (process.env.INBOX_WEAK_TOKEN) await withWeakToken(page, article, process.env.INBOX_WEAK_TOKEN);
  if (token) await useToken(page, token);

  await article.waitFor();
  if (process.env.INBOX_PENDING) await counted(page, process.env.INBOX_PENDING);
  if ((await article.getByRole('heading').count()) < 1) fail('the approval has no heading');
  const runId = await article.getAttribute('data-run-id');
  await expand(article);
  const preview = ((await article.locator('pre.argv').textContent()) || '').trim();
  if (process.env.INBOX_PREVIEW !== undefined && preview !== process.env.INBOX_PREVIEW) {
    fail(`command preview is ${JSON.stringify(preview)}, expected ${JSON.stringify(process.env.INBOX_PREVIEW)}`);
  }
  // The compact line shows the same safe preview, escapes and all.
  const line = ((await article.locator('code.argv-line').textContent()) || '').trim();
  if (line !== preview) fail(`the compact line ${JSON.stringify(line)} differs from the preview`);
  const warning = (await article.locator('.warning').count()) ? await article.locator('.warning').textContent() : null;
  const declared = article.locator('.summary .permissions');
  const permissions = (await declared.count()) ? ((await declared.textContent()) || '').trim() : null;
  const permissionDetails = await article.locator('code.permission').allTextContents();
  const args = article.locator('pre.arguments');
  const argumentsShown = (await args.count()) ? (await args.textContent()) || '' : null;
  await shoot(page, 'pending');

  if (process.env.INBOX_NOTE) await article.getByLabel(/^Note for /).fill(process.env.INBOX_NOTE);
  await decide(page, article);
  await article.waitFor({ state: 'detached' });
  return {
    run_id: runId,
    preview,
    warning,
    permissions,
    permission_details: permissionDetails,
    arguments: argumentsShown,
    ...(await runOutcome(page, runId)),
  };
});
