// Skills asking to activate: a token without the approve role sees a line
// saying so (and no alarm); an approver sees each waiting skill with its
// permissions, trigger and session, denies one with a note and allows the
// other always, confirming in the page first. Run by tests/it/sessions.rs:
//
//   ACTIVATIONS_SESSION=<id> ACTIVATIONS_APPROVER=<token> \
//     node activations.mjs <base_url> <invoke token>

import { drive, fail, shoot } from './lib.mjs';

const session = process.env.ACTIVATIONS_SESSION || fail('ACTIVATIONS_SESSION is required');
const approver = process.env.ACTIVATIONS_APPROVER || fail('ACTIVATIONS_APPROVER is required');

const cardOf = (page, skill) => page.locator(`article[data-activation="${session}/${skill}"]`);

async function shown(card) {
  const text = async (sel) => ((await card.locator(sel).first().textContent()) || '').trim();
  return {
    skill: await text('h3'),
    trust: await text('.badge'),
    permissions: await card.locator('.permissions code').allTextContents(),
    facts: await text('dl.facts'),
  };
}

await drive(
  async (page) => {
    const empty = page.locator('#activations-empty');
    await empty.filter({ hasText: 'approve' }).waitFor();
    const refusedLine = ((await empty.textContent()) || '').trim();
    if (!(await page.locator('#notice').isHidden())) fail('a token without the approve role raised the alarm');

    await page.getByLabel('API token').fill(approver);
    await page.getByRole('button', { name: 'Save token', exact: true }).click();
    const k8s = cardOf(page, 'kubernetes');
    const rfc = cardOf(page, 'rfc-writer');
    await k8s.waitFor();
    await rfc.waitFor();
    const count = ((await page.locator('#activations-count').textContent()) || '').trim();
    const seen = { kubernetes: await shown(k8s), rfc: await shown(rfc) };
    await shoot(page, 'waiting');

    await k8s.getByLabel('Note for kubernetes').fill('not today');
    await k8s.getByRole('button', { name: 'Deny', exact: true }).click();
    await k8s.waitFor({ state: 'detached' });

    const dialog = page.getByRole('dialog', { name: 'Allow always?' });
    await rfc.getByRole('button', { name: 'Allow always', exact: true }).click();
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Cancel', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    if ((await rfc.count()) !== 1) fail('Cancel decided the request');
    await rfc.getByRole('button', { name: 'Allow always', exact: true }).click();
    await dialog.getByRole('button', { name: 'Allow always', exact: true }).click();
    await rfc.waitFor({ state: 'detached' });
    await empty.filter({ hasText: 'No skill is waiting' }).waitFor();
    return { refused_line: refusedLine, count, seen };
  },
  { token: process.argv[3] },
);
