// The keyboard: j/k move the selection (marked, aria-selected, focused),
// a approves the selected request once, d denies it once, and D asks in
// the page before a standing deny: Escape or Cancel leaves the request
// pending. Keys typed into a note are text, not commands. Run by
// tests/it/ui.rs with three pending requests, oldest first:
//
//   INBOX_APPROVAL_IDS="<first> <second> <third>" node keys.mjs <base_url>

import { cardOf, drive, fail, shoot } from './lib.mjs';

const ids = (process.env.INBOX_APPROVAL_IDS || fail('INBOX_APPROVAL_IDS is required')).split(' ');

/** Waits until the card of `id` is the one selected, and has the focus. */
async function selected(page, id) {
  await cardOf(page, id).and(page.locator('[aria-selected="true"].selected')).waitFor();
  await page.waitForFunction((i) => document.activeElement?.dataset?.approvalIds?.split(' ').includes(i), id);
  if ((await page.locator('article[aria-selected="true"]').count()) !== 1) fail('more than one card is selected');
}

/** D, then a way to say no: the dialog goes and the request stays. */
async function refuseStandingDeny(page, id, sayNo) {
  await page.keyboard.press('Shift+D');
  const dialog = page.getByRole('dialog', { name: 'Deny always?' });
  await dialog.waitFor();
  await shoot(page, 'confirm');
  await sayNo(dialog);
  await dialog.waitFor({ state: 'hidden' });
  if ((await cardOf(page, id).count()) !== 1) fail('saying no to "Deny always" removed the request');
}

await drive(async (page) => {
  const decisions = [];
  page.on('request', (req) => {
    if (req.method() === 'POST') decisions.push(new URL(req.url()).pathname);
  });
  for (const id of ids) await cardOf(page, id).waitFor();

  await page.keyboard.press('j');
  await selected(page, ids[0]);
  await page.keyboard.press('j');
  await selected(page, ids[1]);
  await page.keyboard.press('k');
  await selected(page, ids[0]);
  await shoot(page, 'selected');

  await page.keyboard.press('a');
  await cardOf(page, ids[0]).waitFor({ state: 'detached' });
  await selected(page, ids[1]);
  await page.keyboard.press('d');
  await cardOf(page, ids[1]).waitFor({ state: 'detached' });
  await selected(page, ids[2]);

  await refuseStandingDeny(page, ids[2], () => page.keyboard.press('Escape'));
  await selected(page, ids[2]);
  await refuseStandingDeny(page, ids[2], (dialog) => dialog.getByRole('button', { name: 'Cancel', exact: true }).click());

  // Typing a note: every letter is text, none a command.
  await page.keyboard.press('o');
  const note = cardOf(page, ids[2]).getByLabel(/^Note for /);
  await note.pressSequentially('a d A D j k');
  if ((await note.inputValue()) !== 'a d A D j k') fail('the note did not get what was typed');
  if ((await cardOf(page, ids[2]).count()) !== 1) fail('typing a note decided the request');
  return { decisions };
});
