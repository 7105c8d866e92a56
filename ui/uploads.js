// Uploads waiting for review (`GET /reviews`): each version's findings and
// its changes from the serving version, approved or rejected with a note.
//
// `GET /reviews` has no stream: it is read every few seconds while the
// page is in view, at once when it comes back into view, and after each
// decision made here.

import { $, UNAVAILABLE, el, fill, flash, showEmpty } from './dom.js';
import { badge, revealed, size } from './format.js';
import { api } from './api.js';
import { decideFromCard, dropCard, placeCards, polledList } from './cards.js';

const enc = encodeURIComponent;
const reviewKey = (r) => `${r.skill}@${r.version}`;
const reviewPath = (r) => `skills/${enc(r.skill)}@${enc(r.version)}`;

/** Review cards by `skill@version`, kept across reads so a note being typed survives. */
const reviewCards = new Map();
let reviewCount = 0;
const reviews = polledList(
  'reviews',
  (data) => (data && Array.isArray(data.reviews) ? data.reviews : []),
  (list) => renderReviews(list),
  false,
);
export const refreshReviews = () => reviews.refresh();

function renderReviews(list) {
  const wanted = new Map();
  for (const r of list) if (r && r.status === 'pending_review') wanted.set(reviewKey(r), r);
  placeCards($('#reviews'), reviewCards, wanted, createReviewCard, updateReviewCard);
  showReviewCount();
}

function showReviewCount() {
  const n = reviewCards.size;
  $('#reviews-count').textContent = n ? `(${n})` : '';
  const empty = reviews.refused ? UNAVAILABLE : 'No upload is waiting for a review.';
  showEmpty('#reviews-empty', n ? null : empty);
}

function createReviewCard(key, r) {
  const id = `review-${++reviewCount}`;
  const card = { key, id, review: r, signature: '', against: null, changesSeq: 0, busy: false };
  card.summary = el('span', { class: 'summary' });
  card.findings = el('div', { class: 'findings-part' });
  card.changes = el('div', { class: 'changes' });
  card.error = el('p', { class: 'action-error', role: 'alert', hidden: true });
  card.note = el('input', {
    type: 'text',
    class: 'note',
    name: 'note',
    maxlength: '2000',
    placeholder: 'why (kept with the review)',
    'aria-label': `Note for ${r.skill} ${r.version}`,
  });
  card.buttons = [
    ['approve', 'approve', 'Approve', 'Let this version serve (at once when it is the highest)'],
    ['reject', 'deny', 'Reject', 'Keep this version from ever serving'],
  ].map(([decision, look, label, title]) => {
    const button = el('button', { type: 'button', class: look, 'data-decision': decision, title, text: label });
    button.addEventListener('click', () => decideReview(card, decision));
    return button;
  });
  card.article = el(
    'article',
    { class: 'review', 'aria-labelledby': `${id}-title`, 'data-review': key },
    el(
      'header',
      { class: 'line' },
      el('h3', { id: `${id}-title` }, el('span', { class: 'skill', text: r.skill }), ' ', el('span', { class: 'version', text: r.version })),
      card.summary,
    ),
    card.error,
    card.findings,
    card.changes,
    el(
      'div',
      { class: 'decide' },
      el('label', { class: 'note-label' }, el('span', { text: 'Note (optional)' }), card.note),
      el('div', { class: 'buttons' }, card.buttons),
    ),
  );
  reviewCards.set(key, card);
  return card;
}

/** Redraws what the server's answer changed; reads the changes again when the serving version did. */
function updateReviewCard(card, r) {
  card.review = r;
  const findings = Array.isArray(r.findings) ? r.findings : [];
  const signature = JSON.stringify([r.active, findings]);
  if (signature !== card.signature) {
    card.signature = signature;
    fill(card.summary, reviewSummary(r, findings));
    fill(card.findings, findingParts(findings));
  }
  const against = r.active || '';
  if (card.against !== against) {
    card.against = against;
    loadChanges(card);
  }
}

function reviewSummary(r, findings) {
  const n = findings.length;
  return [
    badge('status', 'pending_review'),
    n
      ? el('span', { class: 'badge flag-warning', text: `${n} finding${n === 1 ? '' : 's'}` })
      : el('span', { class: 'badge flag-clean', text: 'no findings' }),
    el('span', { class: 'serving muted', text: r.active ? `serving now: ${r.active}` : 'nothing serves this name yet' }),
  ];
}

function findingParts(findings) {
  if (!findings.length) {
    return [el('p', { class: 'muted no-findings', text: 'The scanner flagged nothing. Read the changes all the same.' })];
  }
  return [
    el('p', { class: 'label', text: 'Findings' }),
    el(
      'ul',
      { class: 'findings' },
      findings.map((f) =>
        el(
          'li',
          { class: 'finding', 'data-code': f.code },
          el(
            'div',
            { class: 'finding-head' },
            el('code', { class: 'finding-code', text: String(f.code) }),
            el('code', { class: 'finding-where' }, revealed(`${f.path}:${f.line}`)),
            el('span', { class: 'finding-message', text: f.message }),
          ),
          f.excerpt ? el('pre', { class: 'excerpt' }, el('code', {}, revealed(f.excerpt))) : null,
        ),
      ),
    ),
  ];
}

/** The diff against the serving version or, with none, the version's files. */
async function loadChanges(card) {
  const r = card.review;
  const against = card.against;
  const seq = ++card.changesSeq;
  if (!card.changes.childElementCount) fill(card.changes, [el('p', { class: 'muted', text: 'Reading the changes…' })]);
  try {
    const parts = against
      ? diffParts(r, against, await api('GET', `skills/${enc(r.skill)}/diff?${new URLSearchParams({ from: against, to: r.version })}`))
      : fileParts(await api('GET', reviewPath(r)));
    if (seq === card.changesSeq) fill(card.changes, parts);
  } catch (err) {
    if (seq !== card.changesSeq) return;
    fill(card.changes, [el('p', { class: 'action-error', text: `The changes could not be read. ${err.message}` })]);
    // Read again with the next list.
    card.against = null;
  }
}

function diffParts(r, against, d) {
  const text = d && typeof d.text === 'string' ? d.text : '';
  const binary = d && Array.isArray(d.binary_changed) ? d.binary_changed : [];
  return [
    el('p', { class: 'label', text: `Changes from ${against} (serving) to ${r.version}` }),
    text
      ? el('pre', { class: 'diff', 'aria-label': `Diff from ${against} to ${r.version}` }, diffLines(text))
      : el('p', { class: 'muted', text: 'No text file differs.' }),
    d && d.truncated ? el('p', { class: 'muted', text: 'The diff is cut short: it is over the server’s limit.' }) : null,
    binary.length
      ? [
          el('p', { class: 'label', text: 'Binary files that differ' }),
          el('ul', { class: 'files binary-changed' }, binary.map((p) => el('li', {}, el('code', {}, revealed(p))))),
        ]
      : null,
  ];
}

/** One span per line, marked as a file header, a hunk header, an addition, a removal or context. */
function diffLines(text) {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  let inHunk = false;
  return lines.map((line) => {
    let kind;
    if (line.startsWith('diff ')) {
      inHunk = false;
      kind = 'meta';
    } else if (line.startsWith('@@')) {
      inHunk = true;
      kind = 'hunk';
    } else if (!inHunk) kind = 'meta';
    else kind = { '+': 'add', '-': 'del' }[line[0]] || 'same';
    return el('span', { class: `diff-line diff-${kind}` }, revealed(line), '\n');
  });
}

function fileParts(detail) {
  const files = detail && Array.isArray(detail.files) ? detail.files : [];
  return [
    el('p', { class: 'label', text: 'Files (no version serves yet, so nothing to compare with)' }),
    files.length
      ? el(
          'ul',
          { class: 'files' },
          files.map((f) => el('li', {}, el('code', { class: 'file-path' }, revealed(f.path)), ' ', el('span', { class: 'muted', text: size(f.size) }))),
        )
      : el('p', { class: 'muted', text: 'No files listed.' }),
  ];
}

function decideReview(card, decision) {
  const r = card.review;
  return decideFromCard(
    card,
    `${r.skill} ${r.version}`,
    (note) => api('POST', `${reviewPath(r)}/review`, { decision, note }),
    () => {
      dropCard(reviewCards, card);
      showReviewCount();
      flash(`${decision === 'approve' ? 'Approved' : 'Rejected'} ${r.skill} ${r.version}.`, false);
    },
    // Decided here or elsewhere, the list says what is left; another
    // version of the skill may now diff against this one.
    refreshReviews,
  );
}
