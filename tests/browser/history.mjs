// The "Decided" view: recent decisions, newest first, with the approver,
// the scope, the note and the run's outcome; paged with "Older"; narrowed
// by skill and by tool. Run by tests/it/ui.rs with one decision of
// inbox-demo older than a full page of decisions of another skill:
//
//   INBOX_OLD_ID=<id> INBOX_NEW_ID=<id> node history.mjs <base_url> <token>

import { drive, fail, shoot } from './lib.mjs';

const oldId = process.env.INBOX_OLD_ID || fail('INBOX_OLD_ID is required');
const newId = process.env.INBOX_NEW_ID || fail('INBOX_NEW_ID is required');
const rowOf = (page, id) => page.locator(`#history-body tr[data-approval-id="${id}"]`);

async function cells(row) {
  const text = async (sel) => ((await row.locator(sel).textContent()) || '').trim();
  return {
    skill: await text('.skill'),
    tool: await text('.tool'),
    status: await text('.verdict .badge'),
    scope: await text('.scope'),
    approver: await text('td.approver'),
    note: await text('td.note'),
    outcome: await text('td.outcome'),
  };
}

/** Applies the filter form and waits for the rows it should leave. */
async function filter(page, skill, tool, rows) {
  await page.getByRole('searchbox', { name: 'Skill', exact: true }).fill(skill);
  await page.getByRole('searchbox', { name: 'Tool', exact: true }).fill(tool);
  await page.getByRole('button', { name: 'Filter', exact: true }).click();
  await page.waitForFunction((n) => document.querySelectorAll('#history-body tr').length === n, rows);
}

await drive(
  async (page) => {
    await page.getByRole('tab', { name: 'Decided' }).click();
    await rowOf(page, newId).waitFor();
    const firstPage = await page.locator('#history-body tr').count();
    if (await rowOf(page, oldId).count()) fail('the oldest decision is on the first page');
    const newest = await cells(rowOf(page, newId));
    await shoot(page, 'page');

    await page.getByRole('button', { name: 'Older', exact: true }).click();
    await rowOf(page, oldId).waitFor();
    await page.getByRole('button', { name: 'Older', exact: true }).waitFor({ state: 'hidden' });
    const both = await page.locator('#history-body tr').count();
    const oldest = await cells(rowOf(page, oldId));

    // Each step changes how many rows there are, so waiting on the count
    // waits for that step's answer.
    await filter(page, 'inbox-demo', '', 1);
    const bySkill = await page.locator('#history-body tr').getAttribute('data-approval-id');
    await filter(page, '', 'say_it', firstPage);
    if (await rowOf(page, oldId).count()) fail('the tool filter kept another tool');
    await filter(page, '', 'leave_mark', 1);
    const byTool = await page.locator('#history-body tr').getAttribute('data-approval-id');
    await filter(page, 'no-such-skill', '', 0);
    const none = ((await page.locator('#history-empty').textContent()) || '').trim();
    return { first_page: firstPage, both, newest, oldest, by_skill: bySkill, by_tool: byTool, none };
  },
  { token: process.argv[3] },
);
