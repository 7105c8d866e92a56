// The decided requests: newest first, a page at a time, filtered by skill
// and tool.

import { $, UNAVAILABLE, el, setProblem, showEmpty } from './dom.js';
import { badge, commandLine, time, who } from './format.js';
import { api } from './api.js';

const HISTORY_PAGE = 50;

const past = { seq: 0, cursor: null, skill: '', tool: '', paged: false, soon: null };

// A decision made while the view is open shows at its top, unless older
// pages were opened: redrawing would lose the person's place.
export function historySoon() {
  if (past.paged) return;
  clearTimeout(past.soon);
  past.soon = setTimeout(() => loadHistory(true), 300);
}

/** The newest page (`fresh`), or the next older one after what is shown. */
export async function loadHistory(fresh) {
  const seq = ++past.seq;
  const params = new URLSearchParams({ limit: String(HISTORY_PAGE) });
  if (past.skill) params.set('skill', past.skill);
  if (past.tool) params.set('tool', past.tool);
  if (!fresh && past.cursor) params.set('cursor', past.cursor);
  past.paged = !fresh;
  try {
    const data = await api('GET', `approvals/history?${params}`);
    if (seq !== past.seq) return;
    showHistory(((data && data.decisions) || []).map(historyRow), fresh, (data && data.next_cursor) || null);
    setProblem('history', null);
  } catch (err) {
    if (seq !== past.seq) return;
    setProblem('history', err.message);
    if (fresh) showHistory([], true, null, UNAVAILABLE);
  }
}

function showHistory(rows, fresh, cursor, failed) {
  const body = $('#history-body');
  if (fresh) body.replaceChildren(...rows);
  else body.append(...rows);
  past.cursor = cursor;
  $('#history-older').hidden = !cursor;
  $('#history-table').hidden = body.children.length === 0;
  const none = past.skill || past.tool ? 'No decisions match this filter.' : 'No decisions yet.';
  showEmpty('#history-empty', body.children.length ? null : failed || none);
}

function historyRow(d) {
  return el(
    'tr',
    { class: 'decision', 'data-approval-id': d.id, 'data-run-id': d.run_id, 'data-status': d.status },
    el('td', {}, time(d.decided_at || d.created_at)),
    el(
      'td',
      {},
      el('span', { class: 'skill muted', text: d.skill }),
      ' / ',
      el('span', { class: 'tool', text: d.tool }),
      el('code', { class: 'argv-line', title: commandLine(d.argv), text: commandLine(d.argv) }),
      el('span', { class: 'muted requester' }, 'asked by ', who(d.requested_by)),
    ),
    el('td', { class: 'verdict' }, badge('decision', d.status), ' ', el('span', { class: 'scope', text: d.scope || '' })),
    el('td', { class: 'approver' }, d.decided_by || el('span', { class: 'muted', text: d.status === 'expired' ? 'nobody (expired)' : '—' })),
    el('td', { class: 'note' }, d.note || el('span', { class: 'muted', text: '—' })),
    el('td', { class: 'outcome' }, d.run_status ? badge('status', d.run_status) : el('span', { class: 'muted', text: '—' })),
  );
}

/** The filter form and the "Older" button. */
export function wireHistory() {
  $('#history-filter').addEventListener('submit', (event) => {
    event.preventDefault();
    const form = event.target;
    past.skill = form.elements.skill.value.trim();
    past.tool = form.elements.tool.value.trim();
    loadHistory(true);
  });
  $('#history-older').addEventListener('click', () => loadHistory(false));
}
