// Live arrival: with the inbox open and following the event stream, a new
// request appears without a reload, the tab's title counts it, an opt-in
// notification announces it (and none announced what was already
// waiting), and a decision made elsewhere takes it away, all without the
// page polling. Run by tests/it/ui.rs, which makes the call and the
// decision when this script says it is ready:
//
//   INBOX_APPROVAL_ID=<already pending> node live.mjs <base_url>
//   → {"step":"ready"}        ← {"approval_id": <the new request>}
//   → {"step":"arrived",…}    ← {} once decided through the API
//   → {"step":"done",…}

import { TIMEOUT_MS, cardOf, drive, fail, hear, say, titleIs } from './lib.mjs';

const first = process.env.INBOX_APPROVAL_ID || fail('INBOX_APPROVAL_ID is required');

/** Every GET of the pending list: the page must not need one while live. */
function countPolls(page) {
  const polls = [];
  page.on('request', (req) => {
    if (/\/approvals\?/.test(req.url())) polls.push(req.url());
  });
  return polls;
}

async function optIn(page) {
  const box = page.getByLabel('Notify me of new requests');
  await box.check();
  await page.waitForFunction(() => localStorage.getItem('skilld.notify') === '1', null, { timeout: TIMEOUT_MS });
}

await drive(
  async (page) => {
    await page.evaluate(() => {
      window.__sameLoad = true;
    });
    await cardOf(page, first).waitFor();
    await page.locator('body[data-stream="live"]').waitFor();
    await titleIs(page, '(1) skilld inbox');
    await optIn(page);
    const polls = countPolls(page);

    say('ready');
    const { approval_id: second } = await hear();
    const asked = Date.now();
    await cardOf(page, second).waitFor();
    const arrivalMs = Date.now() - asked;
    await titleIs(page, '(2) skilld inbox');
    const notes = await page.evaluate(() => window.__notes);
    say('arrived', { arrival_ms: arrivalMs });

    await hear();
    await cardOf(page, second).waitFor({ state: 'detached' });
    await titleIs(page, '(1) skilld inbox');
    const sameLoad = await page.evaluate(() => window.__sameLoad === true);
    if ((await cardOf(page, first).count()) !== 1) fail('the first request left the inbox');
    return { second, arrival_ms: arrivalMs, notes, polls, same_load: sameLoad, title: await page.title() };
  },
  { notifications: true },
);
