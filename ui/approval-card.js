// One card of the inbox: a group of identical pending requests, with the
// command that will run, its arguments and facts, a note and the four
// decisions. What the buttons do is the inbox's (`inbox.js`).

import { el, fact, fill } from './dom.js';
import { age, argumentsLine, badge, commandLine, fromNow, safeJson, time, who } from './format.js';

let cardCount = 0;

/**
 * A new card for the group `key`, drawn from its oldest request `first`.
 * `on.select(card)`, `on.decide(card, action, scope)` and
 * `on.approveAll(card)` answer its clicks.
 */
export function createCard(key, first, on) {
  const id = `card-${++cardCount}`;
  const card = { key, id, members: [], allIds: [], signature: '', open: false, busy: false };
  const chevron = el('span', { class: 'chevron', 'aria-hidden': 'true' });
  card.toggle = el('button', { type: 'button', class: 'toggle plain', 'aria-expanded': 'false', 'aria-controls': `${id}-details` }, chevron, 'Details');
  card.toggle.addEventListener('click', () => setOpen(card, !card.open));
  card.all = el('button', { type: 'button', class: 'approve all', hidden: true });
  card.all.addEventListener('click', () => on.approveAll(card));
  card.summary = el('span', { class: 'summary' });
  card.error = el('p', { class: 'action-error', role: 'alert', hidden: true });
  card.info = el('div', { class: 'info' });
  card.details = el('div', { class: 'details', id: `${id}-details`, hidden: true }, card.info, decidePart(card, first, on));
  card.article = el(
    'article',
    { class: 'approval', role: 'row', tabindex: '-1', 'aria-selected': 'false', 'aria-labelledby': `${id}-title` },
    el('div', { class: 'cell', role: 'gridcell' }, headPart(card, first), card.error, card.details),
  );
  card.article.addEventListener('click', () => on.select(card));
  return card;
}

function headPart(card, a) {
  const title = el('h3', { id: `${card.id}-title` }, el('span', { class: 'skill', text: a.skill }), ' / ', el('span', { class: 'tool', text: a.tool }));
  const command = commandLine(a.argv);
  const args = argumentsLine(a.arguments);
  return el(
    'header',
    { class: 'approval-head' },
    el('div', { class: 'line' }, card.toggle, title, card.summary, card.all),
    el('code', { class: 'argv-line', title: command, text: command }),
    el('code', { class: 'args-line', title: args, text: args, 'aria-label': 'Arguments' }),
  );
}

function decidePart(card, a, on) {
  card.note = el('input', {
    type: 'text',
    class: 'note',
    name: 'note',
    maxlength: '1000',
    placeholder: 'why (kept with the decision)',
    'aria-label': `Note for ${a.skill} / ${a.tool}`,
  });
  card.buttons = [
    ['approve', 'once', 'Approve once', 'Run this call only'],
    ['approve', 'always', 'Approve always', 'Allow every call of this tool until the skill changes'],
    ['deny', 'once', 'Deny once', 'Refuse this call only'],
    ['deny', 'always', 'Deny always', 'Refuse every call of this tool until the skill changes'],
  ].map(([action, scope, label, title]) => {
    const button = el('button', { type: 'button', class: `${action} ${scope}`, 'data-action': action, 'data-scope': scope, title, text: label });
    button.addEventListener('click', () => on.decide(card, action, scope));
    return button;
  });
  return el(
    'div',
    { class: 'decide' },
    el('label', { class: 'note-label' }, el('span', { text: 'Note (optional)' }), card.note),
    el('div', { class: 'buttons' }, card.buttons),
  );
}

/** Redraws what depends on the group's members, only when they changed. */
export function updateCard(card, members) {
  card.members = members;
  const signature = JSON.stringify(members.map((a) => [a.id, a.caller_left_at, a.requested_by, a.expires_at]));
  if (signature === card.signature) return;
  card.signature = signature;
  const first = members[0];
  Object.assign(card.article.dataset, {
    approvalId: first.id,
    approvalIds: members.map((a) => a.id).join(' '),
    runId: first.run_id,
  });
  fill(card.summary, summaryParts(members));
  fill(card.info, infoParts(members));
  // The button decides exactly the requests its label counts.
  card.allIds = members.map((a) => a.id);
  card.all.textContent = `Approve all ${members.length}`;
  card.all.hidden = members.length < 2;
}

export function setOpen(card, open) {
  card.open = open;
  card.details.hidden = !open;
  card.toggle.setAttribute('aria-expanded', String(open));
  card.article.classList.toggle('open', open);
}

function summaryParts(members) {
  const a = members[0];
  const names = [...new Set(members.map((m) => m.requested_by || 'anonymous'))].join(', ');
  return [
    members.length > 1 ? el('span', { class: 'group-count', title: `${members.length} identical requests`, text: `×${members.length}` }) : null,
    a.trust ? badge('trust', a.trust) : null,
    a.warning ? el('span', { class: 'badge flag-warning', title: a.warning, text: 'warning' }) : null,
    permissions(a).length
      ? el('span', { class: 'permissions', title: 'Permissions the skill declares', text: permissions(a).join(' ') })
      : null,
    members.some((m) => m.caller_left_at) ? el('span', { class: 'badge flag-left', text: 'caller left' }) : null,
    el('span', { class: 'who muted', text: names }),
    el('span', { class: 'age muted', 'data-since': a.created_at, title: a.created_at, text: age(a.created_at) }),
  ];
}

function infoParts(members) {
  const a = members[0];
  return [
    a.description ? el('p', { class: 'description', text: a.description }) : null,
    a.warning ? el('p', { class: 'warning' }, el('strong', { text: 'Warning: ' }), a.warning) : null,
    callerLeft(a),
    el('p', { class: 'label', text: 'Command that will run' }),
    el('pre', { class: 'argv', 'aria-label': 'Command preview' }, el('code', { text: commandLine(a.argv) })),
    el('dl', { class: 'facts' }, facts(a)),
    members.length > 1 ? groupNote(members) : null,
  ];
}

// The caller stopped waiting: the decision still counts, but nobody is
// waiting on its answer.
function callerLeft(a) {
  if (!a.caller_left_at) return null;
  return el(
    'p',
    { class: 'caller-left' },
    el('strong', { text: 'The caller stopped waiting ' }),
    `(${fromNow(a.caller_left_at)}). Approving still runs the call and records its result, but nobody is waiting for it.`,
  );
}

function facts(a) {
  const hash = a.skill_hash ? String(a.skill_hash) : '';
  return [
    fact('Working directory', el('code', { text: a.cwd || '' })),
    fact('Mode', el('code', { text: a.mode || 'Global' })),
    fact(
      'Permissions',
      permissions(a).length
        ? permissions(a).map((p) => [el('code', { class: 'permission', text: p }), ' '])
        : el('span', { class: 'muted', text: 'none declared' }),
    ),
    fact('Arguments', el('pre', { class: 'arguments', text: safeJson(a.arguments ?? {}) })),
    fact('Requested by', who(a.requested_by)),
    fact('Requested', time(a.created_at)),
    fact('Expires', time(a.expires_at), ' ', el('span', { class: 'muted expires-in', 'data-until': a.expires_at, text: a.expires_at ? `(${fromNow(a.expires_at)})` : '' })),
    hash ? fact('Skill hash', el('code', { title: hash, text: hash.length > 16 ? `${hash.slice(0, 16)}…` : hash })) : null,
  ];
}

/** What the skill declares it may do; an approval grants it too. */
const permissions = (a) => (Array.isArray(a.permissions) ? a.permissions.map(String) : []);

function groupNote(members) {
  return el(
    'p',
    { class: 'group-note muted' },
    `${members.length} identical requests. The buttons below decide the oldest one; "Approve all ${members.length}" approves each once. Requested by: `,
    members.map((m) => `${m.requested_by || 'anonymous'} (${age(m.created_at)})`).join(', '),
  );
}
