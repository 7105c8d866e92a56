// Signing in to a server without tokens. Opened without the link that
// `skilld serve` prints, the page says how to get in and shows no request.
// An old link (`/ui?secret=…`) is sent back to the page with nothing set,
// and the page says to use the new one. A wrong secret in the link changes
// nothing. The right one (`/ui#secret=…`) leaves the address bar at once
// and is kept in this tab's sessionStorage only: no cookie, nothing in
// localStorage. A reload still works, and the person approves the pending
// call. Run by tests/it/ui.rs with one request pending:
//
//   INBOX_APPROVAL_ID=<id> INBOX_SECRET=<secret> node signin.mjs <base_url>

import { cardOf, drive, expand, fail, landedOnUi, shoot, startLink } from './lib.mjs';

const approvalId = process.env.INBOX_APPROVAL_ID || fail('INBOX_APPROVAL_ID is required');
const secret = process.env.INBOX_SECRET || fail('INBOX_SECRET is required');

/** The page as it is without the secret: `why`, and no request. */
async function locked(page, article, why) {
  const notice = page.locator('#notice').filter({ hasText: why });
  await notice.waitFor();
  if (await article.count()) fail('the request is shown without the secret');
  return ((await notice.textContent()) || '').trim();
}

/** What this browser keeps, as the page and the browser itself see it. */
async function kept(page) {
  const seen = await page.evaluate(() => ({
    href: location.href,
    session: sessionStorage.getItem('skilld.secret'),
    local: JSON.stringify({ ...localStorage }),
    document_cookie: document.cookie,
  }));
  const cookies = await page.context().cookies();
  return {
    href_has_secret: seen.href.includes('secret'),
    session_holds: seen.session === secret,
    local_holds: seen.local.includes(secret),
    document_cookie: seen.document_cookie,
    cookies: cookies.map((c) => c.name),
    token_state: ((await page.locator('#token-state').textContent()) || '').trim(),
  };
}

/** The old link's first answer, before the browser followed it. */
async function oldLinkAnswer(response) {
  const first = await response.request().redirectedFrom()?.response();
  if (!first) fail('the old link was not redirected');
  const headers = await first.allHeaders();
  return { status: first.status(), location: headers.location, set_cookie: headers['set-cookie'] ?? null };
}

await drive(async (page, base) => {
  const article = cardOf(page, approvalId);
  // `drive` came in through the link; a tab that never did:
  await page.evaluate(() => sessionStorage.clear());
  await page.goto(`${base}/ui`);
  const message = await locked(page, article, 'printed when it started');
  await shoot(page, 'locked');

  const old = await page.goto(`${base}/ui?secret=${encodeURIComponent(secret)}`);
  const oldAnswer = await oldLinkAnswer(old);
  await landedOnUi(page, base);
  const oldText = await locked(page, article, 'old form');
  const afterOld = await kept(page);

  // In this tab, only the fragment changes: the page takes it all the same.
  await page.goto(startLink(base, 'not-the-secret'));
  await landedOnUi(page, base);
  const wrong = await locked(page, article, 'did not take the local secret');

  await page.goto('about:blank');
  await page.goto(startLink(base, secret));
  await landedOnUi(page, base);
  await article.waitFor();
  await page.locator('#notice').waitFor({ state: 'hidden' });
  const signedIn = await kept(page);

  await page.reload();
  await landedOnUi(page, base);
  await article.waitFor();
  await page.locator('#notice').waitFor({ state: 'hidden' });
  const reloaded = await kept(page);
  await expand(article);
  await article.getByRole('button', { name: 'Approve once', exact: true }).click();
  await article.waitFor({ state: 'detached' });
  return {
    message,
    old_link: { ...oldAnswer, text: oldText, kept: afterOld },
    wrong,
    signed_in: signedIn,
    reloaded,
  };
});
