// Recent runs: the last twenty, read again when a request changes and on
// a timer that quickens while one is running.

import { $, UNAVAILABLE, el, setProblem, showEmpty } from './dom.js';
import { badge, duration, time, who } from './format.js';
import { api, refused } from './api.js';

const RUNS_BUSY_MS = 2000;
const RUNS_IDLE_MS = 15000;
const FINISHED = new Set([
  'succeeded', 'failed', 'timed_out', 'cancelled', 'denied', 'expired', 'interrupted',
]);

/** Rows by run id with what they were drawn from, redrawn only on change. */
const runRows = new Map();

function runSignature(r) {
  return JSON.stringify([r.status, r.started_at, r.finished_at, Boolean(r.result)]);
}

function runOutput(r) {
  const result = r.result && typeof r.result === 'object' ? r.result : null;
  if (!result) return el('span', { class: 'muted', text: FINISHED.has(r.status) ? '—' : 'not finished' });
  const text = typeof result.output === 'string' ? result.output : '';
  return el(
    'div',
    { class: 'output-cell' },
    result.error ? el('p', { class: 'run-error', text: result.error }) : null,
    text ? el('pre', { class: 'output', text }) : el('span', { class: 'muted output', text: '(no output)' }),
    result.truncated ? el('p', { class: 'muted', text: `truncated: ${result.output_bytes} bytes in all` }) : null,
  );
}

function runExit(result) {
  if (!result || result.exit_code === undefined || result.exit_code === null) return el('span', { class: 'muted', text: '—' });
  return el('span', {}, el('code', { class: 'exit-code', text: String(result.exit_code) }), result.signal ? ` (${result.signal})` : '');
}

function runRow(r) {
  const result = r.result && typeof r.result === 'object' ? r.result : null;
  const finished = FINISHED.has(r.status);
  return el(
    'tr',
    { class: 'run', 'data-run-id': r.id, 'data-status': r.status },
    el('td', {}, badge('status', r.status)),
    el(
      'td',
      {},
      el('span', { class: 'tool', text: r.tool }),
      el('br'),
      el('span', { class: 'muted', text: r.skill }),
      el('br'),
      el('code', { class: 'muted run-id', title: r.id, text: String(r.id).slice(-12) }),
    ),
    el('td', {}, who(r.requested_by)),
    el('td', {}, time(r.created_at)),
    el(
      'td',
      {},
      r.finished_at ? time(r.finished_at) : el('span', { class: 'muted', text: finished ? '—' : 'not yet' }),
      result && typeof result.duration_ms === 'number' ? el('span', { class: 'muted' }, el('br'), duration(result.duration_ms)) : null,
    ),
    el('td', {}, runExit(result)),
    el('td', {}, runOutput(r)),
  );
}

function renderRuns(list) {
  const body = $('#runs-body');
  const wanted = new Set(list.map((r) => r.id));
  for (const [id, entry] of runRows) {
    if (!wanted.has(id)) {
      entry.row.remove();
      runRows.delete(id);
    }
  }
  list.forEach((r, i) => {
    const signature = runSignature(r);
    let entry = runRows.get(r.id);
    if (!entry || entry.signature !== signature) {
      const row = runRow(r);
      if (entry) entry.row.replaceWith(row);
      entry = { row, signature, status: r.status };
      runRows.set(r.id, entry);
    }
    if (body.children[i] !== entry.row) body.insertBefore(entry.row, body.children[i] || null);
  });
  showEmpty('#runs-empty', list.length ? null : 'No runs yet.');
  $('#runs-table').hidden = list.length === 0;
}

function clearRuns() {
  for (const entry of runRows.values()) entry.row.remove();
  runRows.clear();
  showEmpty('#runs-empty', UNAVAILABLE);
  $('#runs-table').hidden = true;
}

// The runs have no stream of their own: they are read again when a
// request changes, and on a timer that quickens while one is running.
let runsInFlight = null;
let runsAgain = false;
let runsTimer = null;

export function refreshRuns() {
  if (runsInFlight) {
    runsAgain = true;
    return;
  }
  clearTimeout(runsTimer);
  runsInFlight = loadRuns().finally(() => {
    runsInFlight = null;
    if (runsAgain) {
      runsAgain = false;
      refreshRuns();
      return;
    }
    const busy = [...runRows.values()].some((e) => e.status === 'queued' || e.status === 'running');
    runsTimer = setTimeout(refreshRuns, busy ? RUNS_BUSY_MS : RUNS_IDLE_MS);
  });
}

/** A read soon, after a request changed. */
export function scheduleRuns() {
  clearTimeout(runsTimer);
  runsTimer = setTimeout(refreshRuns, 250);
}

async function loadRuns() {
  try {
    const data = await api('GET', 'runs?limit=20');
    renderRuns((data && data.runs) || []);
    setProblem('runs', null);
  } catch (err) {
    setProblem('runs', err.message);
    // What this token may not see is not left on screen from an earlier one.
    if (refused(err)) clearRuns();
  }
}
