// Skills asking to activate in a session: allowed once, always, or denied
// with a note the session's caller reads.
//
// `GET /activations` (the approve role) has no stream either: it is read
// like the reviews. A token without the role sees a line saying so, not
// a failure: deciding activations is not its business.

import { $, confirmStep, el, fact, flash, showEmpty } from './dom.js';
import { badge, revealed, time, who } from './format.js';
import { api } from './api.js';
import { decideFromCard, dropCard, placeCards, polledList } from './cards.js';

const enc = encodeURIComponent;

// A card is one request, never updated in place: when a skill changes
// and asks again, the new request is a new card (its permissions may
// differ), and a decision names the request its card shows.
const activationKey = (p) => String(p.id);
/** Activation cards by request id, kept across reads so a note being typed survives. */
const activationCards = new Map();
let activationCount = 0;
// A refusal is the token's role (the other lists say a 401 already).
const activations = polledList(
  'activations',
  (data) => (data && Array.isArray(data.items) ? data.items : []),
  (list) => renderActivations(list),
  true,
);
export const refreshActivations = () => activations.refresh();

function renderActivations(list) {
  const wanted = new Map(list.filter((p) => p && p.id && p.session && p.skill).map((p) => [activationKey(p), p]));
  const update = () => {};
  placeCards($('#activations'), activationCards, wanted, createActivationCard, update);
  showActivationCount();
}

function showActivationCount() {
  const n = activationCards.size;
  $('#activations-count').textContent = n ? `(${n})` : '';
  const empty = activations.refused
    ? 'Not shown: this token has no "approve" role, which deciding activations needs.'
    : 'No skill is waiting to activate.';
  showEmpty('#activations-empty', n ? null : empty);
}

function activationFacts(p) {
  const permissions = Array.isArray(p.permissions) ? p.permissions : [];
  const trigger = p.trigger ? `${p.trigger.kind}: ${p.trigger.value}` : null;
  return el(
    'dl',
    { class: 'facts' },
    fact(
      'Permissions',
      permissions.length
        ? el('ul', { class: 'permissions' }, permissions.map((x) => el('li', {}, el('code', { text: x }))))
        : el('span', { class: 'muted', text: 'none declared (an untrusted skill asks all the same)' }),
    ),
    trigger ? fact('Trigger', el('code', {}, revealed(trigger))) : null,
    p.network ? fact('Network', el('span', { class: 'warning', text: p.network })) : null,
    fact('Session', el('code', { class: 'session-id', text: String(p.session) }), ' of ', who(p.caller)),
    fact('Asked', time(p.requested_at)),
  );
}

function createActivationCard(key, p) {
  const id = `activation-${++activationCount}`;
  const card = { key, id, request: p, busy: false };
  card.error = el('p', { class: 'action-error', role: 'alert', hidden: true });
  card.note = el('input', {
    type: 'text',
    class: 'note',
    name: 'note',
    maxlength: '4096',
    placeholder: 'why (the session’s caller reads it)',
    'aria-label': `Note for ${p.skill}`,
  });
  card.buttons = [
    ['allow_once', 'approve', 'Allow once', 'Activate it in this session'],
    ['allow_always', 'approve always', 'Allow always', 'Activate this version in every session without asking'],
    ['deny', 'deny', 'Deny', 'Keep it off in this session, with the note as the reason'],
  ].map(([decision, look, label, title]) => {
    const button = el('button', { type: 'button', class: look, 'data-decision': decision, title, text: label });
    button.addEventListener('click', () => decideActivation(card, decision));
    return button;
  });
  card.article = el(
    'article',
    {
      class: 'review activation',
      'aria-labelledby': `${id}-title`,
      'data-activation': `${p.session}/${p.skill}`,
      'data-request': key,
    },
    el(
      'header',
      { class: 'line' },
      el('h3', { id: `${id}-title` }, el('span', { class: 'skill', text: p.skill })),
      badge('trust', p.trust),
    ),
    card.error,
    activationFacts(p),
    el(
      'div',
      { class: 'decide' },
      el('label', { class: 'note-label' }, el('span', { text: 'Note (optional)' }), card.note),
      el('div', { class: 'buttons' }, card.buttons),
    ),
  );
  activationCards.set(key, card);
  return card;
}

async function decideActivation(card, decision) {
  const p = card.request;
  if (card.busy) return;
  if (decision === 'allow_always') {
    const sure = await confirmStep(
      'Allow always?',
      `Every later session activates ${p.skill} (this version) without asking anyone, with the ` +
        'permissions it declares, until the skill changes or `skilld permissions --revoke` withdraws it.',
      'Allow always',
      'approve always',
    );
    if (!sure) return;
  }
  const said = { allow_once: 'Allowed once', allow_always: 'Allowed always', deny: 'Denied' }[decision];
  await decideFromCard(
    card,
    p.skill,
    (note) => api('POST', `sessions/${enc(p.session)}/activations/${enc(p.skill)}`, {
      decision,
      note,
      request: p.id,
      hash: p.hash,
    }),
    () => {
      dropCard(activationCards, card);
      showActivationCount();
      flash(`${said}: ${p.skill}.`, false);
    },
    refreshActivations,
  );
}
