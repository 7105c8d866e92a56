// Destinations asking to be reached: a networked run's held connection
// shows as a card with its host and port; "Allow always" asks first and
// Cancel decides nothing; "Allow once" lets the run through. The run's
// next destination is denied from the keyboard with a note the program
// reads. Run by tests/it/ui_egress.rs, which holds the run's connections:
//
//   EGRESS_FIRST=<request id> EGRESS_DESTINATION=<host:port> \
//     node egress.mjs <base_url>
//   → {"step":"allowed",…}   ← {"id": <the second request>}
//   → {"step":"done",…}

import { drive, fail, hear, say, shoot } from './lib.mjs';

const first = process.env.EGRESS_FIRST || fail('EGRESS_FIRST is required');
const destination = process.env.EGRESS_DESTINATION || fail('EGRESS_DESTINATION is required');
const NOTE = 'the task needs no other host';

const cardOf = (page, id) => page.locator(`article[data-egress="${id}"]`);

async function shown(card) {
  const text = async (sel) => ((await card.locator(sel).first().textContent()) || '').trim();
  return {
    headline: await text('h3'),
    destination: await text('.destination'),
    facts: await text('dl.facts'),
    countdown: await text('.countdown'),
  };
}

await drive(async (page) => {
  const card = cardOf(page, first);
  await card.waitFor();
  const count = ((await page.locator('#egress-count').textContent()) || '').trim();
  const seen = await shown(card);
  if (seen.destination !== destination) fail(`the card shows ${seen.destination}, not ${destination}`);
  await shoot(page, 'held');

  // "Allow always" outlives the click: it asks first, and Cancel keeps the card.
  const dialog = page.getByRole('dialog', { name: 'Allow always?' });
  await card.getByRole('button', { name: 'Allow always', exact: true }).click();
  await dialog.waitFor();
  const confirmText = ((await dialog.locator('#confirm-text').textContent()) || '').trim();
  await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
  if ((await card.count()) !== 1) fail('Cancel decided the request');

  await card.getByRole('button', { name: 'Allow once', exact: true }).click();
  await card.waitFor({ state: 'detached' });
  say('allowed', { count, seen, confirm_text: confirmText });

  const { id: second } = await hear();
  const next = cardOf(page, second);
  await next.waitFor();
  const secondSeen = await shown(next);
  // From the note to "Deny" by the keyboard alone: the buttons are in the tab order.
  const note = next.getByLabel('Note for the tool');
  await note.fill(NOTE);
  for (let i = 0; i < 3; i += 1) await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => (document.activeElement && document.activeElement.textContent) || '');
  if (focused !== 'Deny') fail(`three tabs from the note reached ${JSON.stringify(focused)}, not Deny`);
  await page.keyboard.press('Enter');
  await next.waitFor({ state: 'detached' });
  await page.locator('#egress-empty').filter({ hasText: 'No run is waiting' }).waitFor();
  const flash = ((await page.locator('#flash').textContent()) || '').trim();
  return { second: secondSeen, flash };
});
