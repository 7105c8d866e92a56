// Destinations networked runs asked to reach beyond their skill's
// `network.allow`, held for a person (`docs/egress.md`): allowed once (this
// run), always (this skill version) or denied with a note the program reads.
//
// `GET /egress` has no stream: it is read like the activations. A token
// that may not read it sees a line saying so, not a failure.

import { $, confirmStep, el, fact, flash, showEmpty } from './dom.js';
import { hashPrefix, time, who } from './format.js';
import { api } from './api.js';
import { decideFromCard, dropCard, placeCards, polledList } from './cards.js';

const enc = encodeURIComponent;

// A card is one held connection; a decision names the request its card shows.
const egressKey = (r) => String(r.id);
const destination = (r) => `${r.host}:${r.port}`;
/** Egress cards by request id, kept across reads so a note being typed survives. */
const egressCards = new Map();
let egressCount = 0;
// A refusal is the token's role (the other lists say a 401 already).
const held = polledList(
  'egress',
  (data) => (data && Array.isArray(data.items) ? data.items : []),
  (list) => renderEgress(list),
  true,
);
export const refreshEgress = () => held.refresh();

function renderEgress(list) {
  const wanted = new Map(list.filter((r) => r && r.id && r.host && r.skill).map((r) => [egressKey(r), r]));
  const update = () => {};
  placeCards($('#egress'), egressCards, wanted, createEgressCard, update);
  showEgressCount();
  tickWhileShown();
}

function showEgressCount() {
  const n = egressCards.size;
  $('#egress-count').textContent = n ? `(${n})` : '';
  const empty = held.refused
    ? 'Not shown: this token may not read the inbox, which listing held destinations needs.'
    : 'No run is waiting to reach a destination.';
  showEmpty('#egress-empty', n ? null : empty);
}

// ---- the countdown -----------------------------------------------------------

// A held connection waits `egress_wait_secs` (two minutes by default), too
// short for the page's minute-grained ages: each card counts down by the
// second, and only while there is a card to count.
let ticker = null;

function tickWhileShown() {
  if (egressCards.size && !ticker) ticker = setInterval(tick, 1000);
  if (!egressCards.size && ticker) {
    clearInterval(ticker);
    ticker = null;
  }
  tick();
}

function tick() {
  for (const card of egressCards.values()) card.countdown.textContent = countdown(card.request.expires_at);
}

function countdown(iso) {
  const secs = Math.ceil((new Date(iso).getTime() - Date.now()) / 1000);
  if (Number.isNaN(secs)) return '';
  if (secs <= 0) return '(expired: the connection stopped waiting)';
  const m = Math.floor(secs / 60);
  return `(in ${m ? `${m} min ` : ''}${secs % 60} s)`;
}

// ---- a card ------------------------------------------------------------------

function egressFacts(r) {
  const hash = r.skill_hash ? String(r.skill_hash) : '';
  return el(
    'dl',
    { class: 'facts' },
    fact(
      'Skill',
      el('span', { class: 'skill', text: r.skill }),
      r.skill_version ? [' ', el('span', { class: 'version', text: r.skill_version })] : null,
      hash ? [' ', el('code', { class: 'hash', title: hash, text: hashPrefix(hash) })] : null,
    ),
    r.tool ? fact('Tool', el('code', { text: r.tool })) : null,
    fact('Requested by', who(r.requested_by)),
    fact(
      'Run',
      r.run_id
        ? el('code', { class: 'run-id', text: String(r.run_id) })
        : el('span', { class: 'muted', text: 'its long-lived process (a backend)' }),
    ),
    fact('Asked', time(r.created_at)),
    fact('Expires', time(r.expires_at), ' ', el('span', { class: 'muted countdown', text: countdown(r.expires_at) })),
  );
}

function createEgressCard(key, r) {
  const id = `egress-${++egressCount}`;
  const card = { key, id, request: r, busy: false };
  card.error = el('p', { class: 'action-error', role: 'alert', hidden: true });
  card.note = el('input', {
    type: 'text',
    class: 'note',
    name: 'note',
    maxlength: '4096',
    placeholder: 'why (a denial’s note is what the program reads)',
    'aria-label': `Note for the tool (optional), about ${destination(r)}`,
  });
  card.buttons = [
    ['once', 'approve', 'Allow once', 'Let this run reach it'],
    ['always', 'approve always', 'Allow always', 'Let every run of this skill version reach it without asking'],
    ['deny', 'deny', 'Deny', 'Refuse it for this run, with the note as the reason the program reads'],
  ].map(([decision, look, label, title]) => {
    const button = el('button', { type: 'button', class: look, 'data-decision': decision, title, text: label });
    button.addEventListener('click', () => decideEgress(card, decision));
    return button;
  });
  const facts = egressFacts(r);
  card.countdown = facts.querySelector('.countdown');
  card.article = el(
    'article',
    {
      class: 'review egress',
      'aria-labelledby': `${id}-title`,
      'data-egress': key,
      'data-destination': destination(r),
    },
    el('header', { class: 'line' }, el('h3', { id: `${id}-title`, text: r.summary || `${r.skill} wants ${destination(r)}` })),
    el('p', { class: 'destination' }, el('code', { text: destination(r) })),
    card.error,
    facts,
    el(
      'div',
      { class: 'decide' },
      el('label', { class: 'note-label' }, el('span', { text: 'Note for the tool (optional)' }), card.note),
      el('div', { class: 'buttons' }, card.buttons),
    ),
  );
  egressCards.set(key, card);
  return card;
}

async function decideEgress(card, decision) {
  const r = card.request;
  if (card.busy) return;
  if (decision === 'always') {
    const sure = await confirmStep(
      'Allow always?',
      `Every later run of ${r.skill} (this version, ${hashPrefix(r.skill_hash)}) reaches ` +
        `${destination(r)} without asking anyone, across restarts, until the skill's content changes or ` +
        '`skilld permissions --revoke` withdraws it.',
      'Allow always',
      'approve always',
    );
    if (!sure) return;
  }
  const said = { once: 'Allowed once', always: 'Allowed always', deny: 'Denied' }[decision];
  const path = `egress/${enc(r.id)}/${decision === 'deny' ? 'deny' : 'allow'}`;
  await decideFromCard(
    card,
    destination(r),
    (note) => api('POST', path, decision === 'deny' ? { note } : { scope: decision, note }),
    () => {
      dropCard(egressCards, card);
      showEgressCount();
      tickWhileShown();
      flash(`${said}: ${r.skill} to ${destination(r)}.`, false);
    },
    refreshEgress,
  );
}
