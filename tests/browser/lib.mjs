// What the inbox's browser scripts share: a headless chromium with the
// page open, a way to talk to the Rust test that runs them (JSON lines out
// on stdout, in on stdin), and a failure report with the page's text and a
// screenshot. The scripts are run by tests/it/ui.rs.
//
// Environment: CHROMIUM (default /usr/bin/chromium); INBOX_SCREENSHOT, a
// PNG path for the last page (and for the page at a failure).

import { chromium } from 'playwright-core';
import readline from 'node:readline';

// Generous: CI runs these beside the whole suite on two cores.
export const TIMEOUT_MS = 45_000;

export function fail(message) {
  throw new Error(message);
}

/** One line to the Rust test: `{"step": step, ...fields}`. */
export function say(step, fields = {}) {
  console.log(JSON.stringify({ step, ...fields }));
}

const input = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

/** The Rust test's next line, parsed; it says when it has done its part. */
export async function hear() {
  const { value, done } = await input.next();
  if (done) fail('the test closed stdin before saying its part');
  return JSON.parse(value);
}

/**
 * Opens `<base>/ui` in a fresh browser and runs `scenario(page, base)`.
 * With INBOX_SECRET (a server without tokens), it opens the link
 * `skilld serve` prints, `<base>/ui#secret=…`, whose secret the page must
 * take out of the address at once, leaving `/ui`.
 * With `token`, the page finds it saved, as after a person typed it. With
 * `notifications`, the page may notify, and each notification it shows is
 * recorded in `window.__notes`. A script error or a CSP violation fails
 * the run even when the scenario completes: it is a bug of the page.
 */
export async function drive(scenario, { token, notifications } = {}) {
  const base = (process.argv[2] || fail('usage: node <script>.mjs <base_url>')).replace(/\/+$/, '');
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    // Root in a container has no user namespace for chromium's sandbox.
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
    timeout: 60_000,
  });
  let page;
  const problems = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    if (token) await context.addInitScript((t) => localStorage.setItem('skilld.token', t), token);
    if (notifications) await recordNotifications(context, base);
    page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT_MS);
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (msg) => {
      if (msg.type() === 'error' && !/status of 40[13]/.test(msg.text())) problems.push(`console error: ${msg.text()}`);
    });
    const secret = process.env.INBOX_SECRET;
    const response = await page.goto(startLink(base, secret));
    if (!response || response.status() !== 200) fail(`GET /ui answered ${response && response.status()}`);
    await landedOnUi(page, base);
    const result = await scenario(page, base);
    await shoot(page);
    if (problems.length) fail(problems.join('\n'));
    say('done', result);
  } catch (err) {
    await report(err, page, problems);
    process.exitCode = 1;
  } finally {
    await browser.close();
    process.stdin.destroy();
  }
}

/** The link `skilld serve` prints: the secret in the fragment, never sent. */
export const startLink = (base, secret) => (secret ? `${base}/ui#secret=${encodeURIComponent(secret)}` : `${base}/ui`);

/** Fails unless the page's address is `<base>/ui`, no secret in it. */
export async function landedOnUi(page, base) {
  const href = await page.evaluate(() => location.href);
  if (href !== `${base}/ui`) fail(`the page's address is ${href}, not ${base}/ui`);
}

async function recordNotifications(context, base) {
  await context.grantPermissions(['notifications'], { origin: new URL(base).origin });
  await context.addInitScript(() => {
    const Real = window.Notification;
    window.__notes = [];
    window.Notification = class extends Real {
      constructor(title, options) {
        window.__notes.push({ title, body: (options && options.body) || '', tag: (options && options.tag) || '' });
        super(title, options);
      }
    };
  });
}

/** A screenshot for a person to look at; `suffix` names one taken on the way. */
export async function shoot(page, suffix = '') {
  const shot = process.env.INBOX_SCREENSHOT;
  if (!shot || !page) return;
  const path = suffix ? shot.replace(/(\.png)?$/, `-${suffix}.png`) : shot;
  await page.screenshot({ path, fullPage: true }).catch(() => {});
}

async function report(err, page, problems) {
  console.error(`browser test failed: ${err.stack || err.message}`);
  if (problems.length) console.error(problems.join('\n'));
  if (!page) return;
  const text = await page.locator('body').innerText().catch(() => '(page text unavailable)');
  console.error(`--- page text ---\n${text}`);
  await shoot(page);
}

/** The card holding pending request `id` (alone or in a group). */
export const cardOf = (page, id) => page.locator(`article[data-approval-ids~="${id}"]`);

/** Opens a card's details (the full preview, the note and every decision). */
export async function expand(card) {
  const toggle = card.getByRole('button', { name: 'Details', exact: true });
  if ((await toggle.getAttribute('aria-expanded')) !== 'true') await toggle.click();
  await card.locator('.details').waitFor();
}

/** Waits until the tab's title is `title`. */
export async function titleIs(page, title) {
  await page.waitForFunction((t) => document.title === t, title, { timeout: TIMEOUT_MS });
}
