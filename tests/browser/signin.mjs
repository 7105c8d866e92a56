// Signing in to a server without tokens. Opened without the link that
// `skilld serve` prints, the page says how to get in and shows no request;
// a wrong secret in the link changes nothing; the right one lands on /ui,
// the secret gone from the address and kept as an HttpOnly, SameSite=Strict
// cookie, and the person approves the pending call. Run by tests/it/ui.rs
// with one request pending:
//
//   INBOX_APPROVAL_ID=<id> INBOX_SECRET=<secret> node signin.mjs <base_url>

import { cardOf, drive, expand, fail, shoot } from './lib.mjs';

const approvalId = process.env.INBOX_APPROVAL_ID || fail('INBOX_APPROVAL_ID is required');
const secret = process.env.INBOX_SECRET || fail('INBOX_SECRET is required');

/** The page as it is without the secret: the way in, and no request. */
async function locked(page, article) {
  const notice = page.locator('#notice');
  await notice.filter({ hasText: 'printed when it started' }).waitFor();
  if (await article.count()) fail('the request is shown without the secret');
  return ((await notice.textContent()) || '').trim();
}

await drive(async (page, base) => {
  const article = cardOf(page, approvalId);
  // `drive` came in through the link; a browser that never did:
  await page.context().clearCookies();
  await page.goto(`${base}/ui`);
  const message = await locked(page, article);
  await shoot(page, 'locked');

  await page.goto(`${base}/ui?secret=not-the-secret`);
  if (page.url() !== `${base}/ui`) fail(`a wrong link led to ${page.url()}`);
  await locked(page, article);
  if ((await page.context().cookies()).length) fail('a wrong secret left a cookie');

  await page.goto(`${base}/ui?secret=${encodeURIComponent(secret)}`);
  if (page.url() !== `${base}/ui`) fail(`the link led to ${page.url()}`);
  const cookies = await page.context().cookies();
  const kept = cookies.filter((c) => c.value === secret);
  if (kept.length !== 1) fail(`the link left cookies ${JSON.stringify(cookies.map((c) => c.name))}`);
  const [cookie] = kept;
  await article.waitFor();
  await page.locator('#notice').waitFor({ state: 'hidden' });
  await expand(article);
  await article.getByRole('button', { name: 'Approve once', exact: true }).click();
  await article.waitFor({ state: 'detached' });
  const scriptSees = await page.evaluate(() => document.cookie);
  return {
    message,
    cookie: { http_only: cookie.httpOnly, same_site: cookie.sameSite, path: cookie.path },
    // HttpOnly: no script of the page reads it.
    script_sees: scriptSees,
  };
});
