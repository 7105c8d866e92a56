// The inbox: every pending request, grouped into cards (`approval-card.js`),
// decided from a card or from the keyboard. What it holds comes from the
// live stream or its fallback poll (`stream.js`).

import { $, UNAVAILABLE, confirmStep, flash, setProblem, showEmpty } from './dom.js';
import { canonicalJson, hashPrefix } from './format.js';
import { api } from './api.js';
import { createCard, setOpen, updateCard } from './approval-card.js';
import { notify } from './notify.js';
import { scheduleRuns } from './runs.js';
import { loadGrants } from './grants.js';
import { historySoon } from './history.js';
import { currentView, showView } from './views.js';

const TITLE = 'skilld inbox';
// The inbox's pages after the stream's first: as big as the API allows.
export const INBOX_PAGE = 500;

// ---- the state -------------------------------------------------------------

/** Every pending request by id: what the stream (or the poll) last said. */
const pending = new Map();
/** Ids ever seen pending, so each new request is announced once. */
const known = new Set();
// The first list is what was already waiting: only later ones notify.
let primed = false;
let blocked = false;

// A snapshot is the inbox's first page; the rest are read after it
// (`readRest`), and only once the last is read does what no page held
// leave, so the cards past the first page stay put meanwhile. What a
// change told of while reading is newer than any page: a page cannot
// bring back a request decided since, nor undo a change.
const read = { gen: 0, held: new Set(), told: new Set(), whole: false };

/** The inbox's first page, from the stream or the poll; `nextCursor` leads to the rest. */
export function applySnapshot(list, nextCursor) {
  const gen = ++read.gen;
  read.held = new Set();
  read.told = new Set();
  blocked = false;
  applyPage(list, false);
  readRest(gen, nextCursor || null);
}

/** The snapshot's later pages, oldest first, until the last or a newer snapshot. */
async function readRest(gen, cursor) {
  while (cursor && gen === read.gen) {
    const params = new URLSearchParams({ status: 'pending', limit: String(INBOX_PAGE), cursor });
    let data;
    try {
      data = await api('GET', `approvals?${params}`);
    } catch (err) {
      // The next snapshot (the stream follows again, or the poll) reads them afresh.
      if (gen === read.gen) setProblem('approvals', err.message);
      return;
    }
    if (gen !== read.gen) return;
    // Until the inbox was read whole once, its pages are what was already waiting.
    applyPage((data && data.approvals) || [], !read.whole);
    cursor = (data && data.next_cursor) || null;
  }
  if (gen !== read.gen) return;
  for (const id of pending.keys()) if (!read.held.has(id) && !read.told.has(id)) pending.delete(id);
  read.whole = true;
  renderApprovals();
}

function applyPage(list, quiet) {
  const shown = list.filter((a) => a.status === 'pending' && !read.told.has(a.id));
  for (const a of shown) {
    pending.set(a.id, a);
    read.held.add(a.id);
  }
  announce(shown, quiet);
  renderApprovals();
}

/** One request created or changed: anything not pending leaves the inbox. */
export function applyChange(a) {
  if (!a || !a.id) return;
  read.told.add(a.id);
  if (a.status === 'pending') {
    pending.set(a.id, a);
    announce([a]);
  } else {
    pending.delete(a.id);
    if (a.scope === 'always' && currentView() === 'grants') loadGrants();
    if (currentView() === 'decided') historySoon();
  }
  renderApprovals();
  scheduleRuns();
}

/** Nothing shown: what this token may not see is not left from an earlier one. */
export function clearApprovals() {
  read.gen++;
  pending.clear();
  blocked = true;
  renderApprovals();
}

function announce(list, quiet) {
  const fresh = list.filter((a) => !known.has(a.id));
  fresh.forEach((a) => known.add(a.id));
  if (primed && !quiet) fresh.forEach((a) => notify(a, () => reveal(a.id)));
  primed = true;
}

/** A notification's click: the pending view, its request's card selected. */
function reveal(id) {
  showView('pending');
  const card = [...cards.values()].find((c) => c.allIds.includes(id));
  if (card) select(card, true);
}

/**
 * Oldest first; only truly identical requests together: the same skill
 * version, tool, command, directory, mode and arguments. The arguments
 * count for every tool: an entrypoint's or a manifest tool's command is
 * the same for every call, so they alone tell its calls apart.
 */
function groups() {
  const at = (a) => Date.parse(a.created_at) || 0;
  const byKey = new Map();
  for (const a of [...pending.values()].sort((x, y) => at(x) - at(y))) {
    const key = JSON.stringify([a.skill, a.tool, a.skill_hash, a.cwd, a.mode || '', a.argv, canonicalJson(a.arguments ?? {})]);
    if (!byKey.has(key)) byKey.set(key, []);
    byKey.get(key).push(a);
  }
  return byKey;
}

// ---- the cards -------------------------------------------------------------

/** Cards by group key, kept across updates so a note being typed survives. */
const cards = new Map();
const cardOf = new WeakMap();
const onCard = {
  select: (card) => select(card, false),
  decide: (card, action, scope) => decideCard(card, action, scope),
  approveAll: (card) => approveAll(card),
};

function renderApprovals() {
  const byKey = groups();
  for (const [key, card] of cards) {
    if (!byKey.has(key)) {
      card.article.remove();
      cards.delete(key);
    }
  }
  const container = $('#approvals');
  [...byKey].forEach(([key, members], i) => {
    let card = cards.get(key);
    if (!card) {
      card = createCard(key, members[0], onCard);
      cards.set(key, card);
      cardOf.set(card.article, card);
    }
    updateCard(card, members);
    // Move only what is out of place: moving a node blurs the note being typed.
    if (container.children[i] !== card.article) container.insertBefore(card.article, container.children[i] || null);
  });
  showCount(pending.size);
  const empty = blocked ? UNAVAILABLE : 'Nothing is waiting for a decision.';
  showEmpty('#approvals-empty', pending.size ? null : empty);
  keepSelection();
}

/** How many requests wait, beside the heading, on the tab and in the title. */
export function showCount(n) {
  $('#approvals-count').textContent = n ? `(${n})` : '';
  $('#tab-count').textContent = n ? `(${n})` : '';
  document.title = n ? `(${n}) ${TITLE}` : TITLE;
}

// ---- deciding --------------------------------------------------------------

async function decide(a, action, scope, note) {
  await api('POST', `approvals/${encodeURIComponent(a.id)}/${action}`, { scope, note });
  read.told.add(a.id);
  if (pending.delete(a.id)) renderApprovals();
}

function confirmAlways(a, action) {
  const verb = action === 'approve' ? 'Approve' : 'Deny';
  const effect = action === 'approve' ? 'run' : 'be refused';
  return confirmStep(
    `${verb} always?`,
    `${verb} this request, and every later call of ${a.tool} from ${a.skill} ` +
      `(this version, ${hashPrefix(a.skill_hash)}) will ${effect} without asking anyone, ` +
      'until the skill changes or the decision is revoked under "Standing decisions".',
    `${verb} always`,
    `${action} always`,
  );
}

/** One decision on the oldest request of a card; `always` asks first. */
async function decideCard(card, action, scope) {
  const target = card.members[0];
  if (!target || card.busy) return;
  if (scope === 'always' && !(await confirmAlways(target, action))) return;
  await busyWith(card, async () => {
    await decide(target, action, scope, card.note.value.trim());
    card.note.value = '';
    const verb = action === 'approve' ? 'Approved' : 'Denied';
    flash(`${verb} ${scope}: ${target.skill} / ${target.tool}.`, false);
  });
}

async function approveAll(card) {
  const targets = card.allIds.map((id) => pending.get(id)).filter(Boolean);
  if (!targets.length || card.busy) return;
  const note = card.note.value.trim();
  await busyWith(card, async () => {
    const failures = [];
    for (const a of targets) await decide(a, 'approve', 'once', note).catch((err) => failures.push(err.message));
    const done = targets.length - failures.length;
    if (failures.length) throw new Error(`${done} of ${targets.length} approved. ${failures[0]}`);
    flash(`Approved ${done} requests once: ${targets[0].skill} / ${targets[0].tool}.`, false);
  });
}

/** Runs a decision with the card's buttons off; a failure shows on the card. */
async function busyWith(card, work) {
  const controls = [...card.buttons, card.all];
  card.error.hidden = true;
  card.busy = true;
  card.article.classList.add('busy');
  controls.forEach((b) => { b.disabled = true; });
  try {
    await work();
  } catch (err) {
    card.error.textContent = err.message;
    card.error.hidden = false;
    flash(`${card.members[0] ? `${card.members[0].skill} / ${card.members[0].tool}: ` : ''}${err.message}`, true);
  } finally {
    card.busy = false;
    card.article.classList.remove('busy');
    controls.forEach((b) => { b.disabled = false; });
    scheduleRuns();
  }
}

// ---- selection and keys ----------------------------------------------------

let selectedKey = null;
let selectedIndex = -1;

function select(card, focus) {
  selectedKey = card ? card.key : null;
  for (const c of cards.values()) {
    c.article.classList.toggle('selected', c === card);
    c.article.setAttribute('aria-selected', String(c === card));
  }
  if (!card) return;
  selectedIndex = [...$('#approvals').children].indexOf(card.article);
  if (focus) card.article.focus();
}

/** After a change, the selection stays put, or moves to the card now in its place. */
function keepSelection() {
  if (selectedKey === null) return;
  const card = cards.get(selectedKey);
  if (card) {
    selectedIndex = [...$('#approvals').children].indexOf(card.article);
    return;
  }
  const list = $('#approvals').children;
  const next = list.length ? cardOf.get(list[Math.min(selectedIndex, list.length - 1)]) : null;
  const lostFocus = !document.activeElement || document.activeElement === document.body;
  select(next, lostFocus);
}

function move(delta) {
  const list = [...$('#approvals').children];
  if (!list.length) return;
  const selected = cards.get(selectedKey);
  const at = selected ? list.indexOf(selected.article) : -1;
  const next = at < 0 ? (delta > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, at + delta));
  select(cardOf.get(list[next]), true);
}

function onSelected(action) {
  return () => {
    const card = cards.get(selectedKey);
    if (card) action(card);
  };
}

const KEYS = {
  j: () => move(1),
  k: () => move(-1),
  o: onSelected((c) => setOpen(c, !c.open)),
  a: onSelected((c) => decideCard(c, 'approve', 'once')),
  d: onSelected((c) => decideCard(c, 'deny', 'once')),
  A: onSelected((c) => decideCard(c, 'approve', 'always')),
  D: onSelected((c) => decideCard(c, 'deny', 'always')),
};

const TYPING = 'textarea, select, [contenteditable], input:not([type=checkbox]):not([type=radio]):not([type=button]):not([type=submit])';

function onKey(event) {
  if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
  if (currentView() !== 'pending' || $('#confirm').open) return;
  if (event.target instanceof Element && event.target.closest(TYPING)) return;
  let action = KEYS[event.key];
  if (event.key === 'Enter' && event.target instanceof Element && event.target.matches('article.approval')) action = KEYS.o;
  if (!action) return;
  event.preventDefault();
  action();
}

/** The keys of the pending view (`j`, `k`, `o`, `a`, `d`, `A`, `D`). */
export function wireKeys() {
  document.addEventListener('keydown', onKey);
}
