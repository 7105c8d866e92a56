// The page's reading of the event stream, against answers crafted here
// (the server's own stream is exercised by live.mjs): CRLF line ends, a
// comment, an event whose data spans two lines; a stream that ends is
// followed again after a short wait; a 403 on the stream shows the same
// message as any other refusal and clears the inbox; the next stream, the
// server's own, replaces it all with the server's inbox. Run by
// tests/it/ui.rs with one request pending on the server:
//
//   INBOX_APPROVAL_ID=<id> node stream.mjs <base_url>

import { cardOf, drive, fail, titleIs } from './lib.mjs';

const real = process.env.INBOX_APPROVAL_ID || fail('INBOX_APPROVAL_ID is required');

function approval(id, tool) {
  const now = new Date().toISOString();
  return {
    id, run_id: `run-${id}`, skill: 'crafted', tool, description: '', trust: 'user', warning: null,
    arguments: {}, argv: ['echo', tool], cwd: '/', skill_hash: 'ab'.repeat(32), status: 'pending',
    scope: null, requested_by: 'agent', decided_by: null, note: null, created_at: now, decided_at: null,
    expires_at: now, mode: null, caller_left_at: null,
  };
}

const A = approval('00000000-0000-4000-8000-00000000000a', 'first');
const B = approval('00000000-0000-4000-8000-00000000000b', 'second');

/** The first stream: everything the format allows that a naive reader trips on. */
function firstStream() {
  const snapshot = JSON.stringify({ approvals: [A] });
  const half = snapshot.indexOf('"approvals"');
  return [
    ': keep-alive',
    '',
    'event: snapshot',
    `data: ${snapshot.slice(0, half)}`,
    `data:${snapshot.slice(half)}`,
    '',
    'event: approval',
    `data: ${JSON.stringify(B)}`,
    '',
    '',
  ].join('\r\n');
}

const answers = [
  { status: 200, contentType: 'text/event-stream', body: firstStream() },
  { status: 403, contentType: 'application/problem+json', body: JSON.stringify({ title: 'Forbidden', status: 403, detail: 'this token may not read the inbox' }) },
];

await drive(async (page) => {
  const streams = [];
  await page.route('**/approvals/events', (route) => {
    streams.push(Date.now());
    const answer = answers[streams.length - 1];
    return answer ? route.fulfill(answer) : route.continue();
  });
  // While the stream is down the page may poll: it hears the same.
  await page.route('**/approvals?status=pending*', (route) =>
    route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ approvals: [A, B] }) }));
  await page.reload();

  const card = (x) => page.locator(`article[data-approval-ids~="${x.id}"]`);
  await card(A).waitFor();
  await card(B).waitFor();
  await titleIs(page, '(2) skilld inbox');

  const notice = page.locator('#notice');
  await notice.filter({ hasText: 'Forbidden (403): this token may not read the inbox' }).waitFor();
  await card(A).waitFor({ state: 'detached' });
  await titleIs(page, 'skilld inbox');
  const emptyLine = ((await page.locator('#approvals-empty').textContent()) || '').trim();

  await cardOf(page, real).waitFor();
  await notice.waitFor({ state: 'hidden' });
  await page.locator('body[data-stream="live"]').waitFor();
  await titleIs(page, '(1) skilld inbox');
  if ((await card(A).count()) || (await card(B).count())) fail("the server's snapshot did not replace the inbox");
  return { streams: streams.length, gaps: streams.slice(1).map((t, i) => t - streams[i]), empty_line: emptyLine };
});
