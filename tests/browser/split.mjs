// Only truly identical requests share a card: calls of one entrypoint
// tool (whose command line never changes) with different arguments are two
// cards, each showing its own arguments, and "Approve all" of the card of
// the identical pair approves those two and nothing else. Run by
// tests/it/attacks_limits.rs:
//
//   INBOX_APPROVAL_IDS="<id> <id>" INBOX_OTHER_ID="<id>" node split.mjs <base_url> <token>

import { drive, fail, shoot, titleIs } from './lib.mjs';

const ids = (process.env.INBOX_APPROVAL_IDS || fail('INBOX_APPROVAL_IDS is required')).split(' ');
const other = process.env.INBOX_OTHER_ID || fail('INBOX_OTHER_ID is required');
const token = process.argv[3] || fail('usage: node split.mjs <base_url> <token>');

await drive(async (page) => {
  const pair = page.locator(`article${ids.map((id) => `[data-approval-ids~="${id}"]`).join('')}`);
  const single = page.locator(`article[data-approval-ids~="${other}"]`);
  await pair.waitFor();
  await single.waitFor();
  await titleIs(page, `(${ids.length + 1}) skilld inbox`);
  const text = async (locator) => ((await locator.textContent()) || '').trim();
  const seen = {
    cards: await page.locator('article.approval').count(),
    pair_ids: (await pair.getAttribute('data-approval-ids')) || '',
    single_ids: (await single.getAttribute('data-approval-ids')) || '',
    pair_count: await text(pair.locator('.group-count')),
    pair_command: await text(pair.locator('code.argv-line')),
    single_command: await text(single.locator('code.argv-line')),
    pair_arguments: await text(pair.locator('code.args-line')),
    single_arguments: await text(single.locator('code.args-line')),
    single_has_approve_all: await single.getByRole('button', { name: /^Approve all/ }).isVisible(),
  };
  await shoot(page, 'pending');
  await pair.getByRole('button', { name: `Approve all ${ids.length}`, exact: true }).click();
  await pair.waitFor({ state: 'detached' });
  await titleIs(page, '(1) skilld inbox');
  // The other call is still there, undecided.
  seen.single_after = await single.count();
  seen.flash = await text(page.locator('#flash'));
  return seen;
}, { token });
