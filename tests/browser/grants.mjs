// Standing decisions: the view lists a grant (skill, tool, version prefix,
// decision, who, when); "Revoke" asks in the page first, Cancel keeps it,
// and confirming revokes it. Run by tests/it/ui.rs:
//
//   INBOX_GRANT_ID=<id> node grants.mjs <base_url> <token>

import { drive, fail } from './lib.mjs';

const grantId = process.env.INBOX_GRANT_ID || fail('INBOX_GRANT_ID is required');

async function cells(row) {
  const text = async (sel) => ((await row.locator(sel).textContent()) || '').trim();
  return {
    skill: await text('td.skill'),
    tool: await text('td.tool'),
    hash: await text('code.hash'),
    decision: await text('.badge'),
    by: await text('td.by'),
  };
}

await drive(
  async (page) => {
    const deletes = [];
    page.on('request', (req) => {
      if (req.method() === 'DELETE') deletes.push(new URL(req.url()).pathname);
    });
    await page.getByRole('tab', { name: 'Standing decisions' }).click();
    const row = page.locator(`tr[data-grant-id="${grantId}"]`);
    await row.waitFor();
    const shown = await cells(row);
    const rows = await page.locator('tr[data-grant-id]').count();

    const dialog = page.getByRole('dialog', { name: 'Revoke this standing decision?' });
    await row.getByRole('button', { name: /^Revoke/ }).click();
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    if (deletes.length || (await row.count()) !== 1) fail('Cancel revoked the grant');

    await row.getByRole('button', { name: /^Revoke/ }).click();
    await dialog.getByRole('button', { name: 'Revoke', exact: true }).click();
    await row.waitFor({ state: 'detached' });
    return { shown, rows, deletes, left: await page.locator('tr[data-grant-id]').count() };
  },
  { token: process.argv[3] },
);
