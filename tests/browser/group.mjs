// Grouping: identical pending requests (same skill, tool and command) show
// as one card with their count and an "Approve all N" button, which
// decides each of them once. Run by tests/it/ui.rs:
//
//   INBOX_APPROVAL_IDS="<id> <id> <id>" node group.mjs <base_url> <token>
//
// The three requests come from three callers: one caller's identical
// calls join one request.

import { drive, fail, shoot, titleIs } from './lib.mjs';

const ids = (process.env.INBOX_APPROVAL_IDS || fail('INBOX_APPROVAL_IDS is required')).split(' ');
const token = process.argv[3] || fail('usage: node group.mjs <base_url> <token>');

await drive(async (page) => {
  const card = page.locator(`article${ids.map((id) => `[data-approval-ids~="${id}"]`).join('')}`);
  await card.waitFor();
  await titleIs(page, `(${ids.length}) skilld inbox`);
  const cards = await page.locator('article.approval').count();
  const count = ((await card.locator('.group-count').textContent()) || '').trim();
  const label = `Approve all ${ids.length}`;
  await shoot(page, 'pending');
  // On the compact card: no need to open the details first.
  await card.getByRole('button', { name: label, exact: true }).click();
  await card.waitFor({ state: 'detached' });
  await titleIs(page, 'skilld inbox');
  await page.locator('#approvals-empty').filter({ hasText: 'Nothing is waiting for a decision.' }).waitFor();
  const flash = ((await page.locator('#flash').textContent()) || '').trim();
  return { cards, count, label, flash };
}, { token });
