// The local secret reaches no other port of the host (issue 40, point 7):
// a browser sends a cookie to every port of the host that set it, so a
// secret kept in one would go to any local listener the person's browser
// visits. Signed in through the start link, the page shows the pending
// call; the same browser then opens pages of another listener on
// 127.0.0.1 (the test's, at INBOX_FOREIGN), in this tab and in a new one;
// the test reads what that listener received and replays the old cookie
// itself, then the person, back in the inbox, approves. Run by
// tests/it/ui.rs with one request pending:
//
//   INBOX_APPROVAL_ID=<id> INBOX_SECRET=<secret> INBOX_FOREIGN=<url> node ports.mjs <base_url>

import { cardOf, drive, expand, fail, hear, landedOnUi, say } from './lib.mjs';

const approvalId = process.env.INBOX_APPROVAL_ID || fail('INBOX_APPROVAL_ID is required');
const foreign = process.env.INBOX_FOREIGN || fail('INBOX_FOREIGN is required');

await drive(async (page, base) => {
  const article = cardOf(page, approvalId);
  await article.waitFor();

  await page.goto(`${foreign}here`);
  // What a script of that page finds in its origin's storage.
  const foreignSees = await page.evaluate(() =>
    JSON.stringify({ session: { ...sessionStorage }, local: { ...localStorage }, cookie: document.cookie }));
  const tab = await page.context().newPage();
  await tab.goto(`${foreign}new-tab`);
  await tab.close();
  say('visited', { foreign_sees: foreignSees, cookies: (await page.context().cookies()).length });
  await hear();

  // Back in this tab, the inbox's origin still holds its secret.
  await page.goto(`${base}/ui`);
  await landedOnUi(page, base);
  await article.waitFor();
  await page.locator('#notice').waitFor({ state: 'hidden' });
  await expand(article);
  await article.getByRole('button', { name: 'Approve once', exact: true }).click();
  await article.waitFor({ state: 'detached' });
  return {};
});
