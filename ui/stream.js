// The live stream of pending requests (`GET /approvals/events`), and the
// poll that stands in for it only while it is down.

import { $, setProblem } from './dom.js';
import { BASE, api, authHeaders, describeProblem, refused } from './api.js';
import { INBOX_PAGE, applyChange, applySnapshot, clearApprovals } from './inbox.js';

const POLL_MS = 2000;
// The server sends a keep-alive every 15 s: a stream silent for longer is
// dead even if no error says so (a proxy or a sleeping laptop).
const SILENCE_MS = 45000;
const BACKOFF_MS = [1000, 2000, 5000, 10000, 15000];

let streamGen = 0;
let streamAbort = null;

function setStreamState(state) {
  document.body.dataset.stream = state;
  $('#refreshed').textContent = {
    connecting: 'Connecting…',
    live: 'Live',
    polling: `Live updates unavailable: checking every ${POLL_MS / 1000} s`,
    refused: '',
  }[state];
}

/** Follows `GET /approvals/events` until a newer follow (a new token) takes over. */
export async function follow() {
  const gen = ++streamGen;
  if (streamAbort) streamAbort.abort();
  let attempt = 0;
  setStreamState('connecting');
  while (gen === streamGen) {
    const outcome = await connect(gen);
    if (gen !== streamGen) return;
    // A stream that was live a while ended as streams do (the server
    // bounds their time, or restarts): straight back, no poll between.
    if (outcome.liveAt && Date.now() - outcome.liveAt > 5000) {
      attempt = 0;
      setStreamState('connecting');
      continue;
    }
    if (outcome.liveAt) attempt = 0;
    setStreamState(outcome.refused ? 'refused' : 'polling');
    if (!outcome.refused) startPolling();
    await new Promise((resolve) => setTimeout(resolve, BACKOFF_MS[Math.min(attempt++, BACKOFF_MS.length - 1)]));
  }
}

async function connect(gen) {
  const abort = new AbortController();
  streamAbort = abort;
  const outcome = { liveAt: 0, refused: false };
  try {
    const res = await fetch(new URL('approvals/events', BASE), {
      headers: authHeaders('text/event-stream'),
      cache: 'no-store',
      credentials: 'omit',
      signal: abort.signal,
    });
    if (!res.ok) outcome.refused = await streamRefused(res);
    else if (/^text\/event-stream/.test(res.headers.get('content-type') || '')) {
      await readEvents(res.body, abort, (type, data) => {
        if (gen !== streamGen) return;
        if (type === 'snapshot' && !outcome.liveAt) outcome.liveAt = Date.now();
        onEvent(type, data);
      });
    }
  } catch {
    /* dropped or unreachable: reconnect below */
  }
  abort.abort();
  return outcome;
}

/** True when the answer is about the token: no polling then, only the message. */
async function streamRefused(res) {
  if (res.status !== 401 && res.status !== 403) return false;
  const problem = await res.json().catch(() => null);
  setProblem('approvals', describeProblem(res.status, problem));
  clearApprovals();
  stopPolling();
  return true;
}

async function readEvents(body, abort, dispatch) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = sseParser(dispatch);
  let silence = setTimeout(() => abort.abort(), SILENCE_MS);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      clearTimeout(silence);
      silence = setTimeout(() => abort.abort(), SILENCE_MS);
      parser(decoder.decode(value, { stream: true }));
    }
  } finally {
    clearTimeout(silence);
  }
}

/**
 * The event-stream format, as the HTML standard reads it: lines end in
 * CR, LF or CRLF (a CRLF may be split across chunks), a blank line ends
 * an event, `:` starts a comment (the keep-alive), and `data` lines join
 * with newlines.
 */
function sseParser(dispatch) {
  let buffer = '';
  let skipLF = false;
  let type = '';
  let data = [];
  function line(text) {
    if (text === '') {
      if (data.length) dispatch(type || 'message', data.join('\n'));
      type = '';
      data = [];
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    const value = colon < 0 ? '' : text.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
  }
  return (chunk) => {
    const text = skipLF && chunk.startsWith('\n') ? chunk.slice(1) : chunk;
    skipLF = text.endsWith('\r');
    const lines = (buffer + text).split(/\r\n|\r|\n/);
    buffer = lines.pop();
    lines.forEach(line);
  };
}

function onEvent(type, data) {
  let body;
  try {
    body = JSON.parse(data);
  } catch {
    return;
  }
  if (type === 'snapshot') {
    stopPolling();
    setProblem('approvals', null);
    setStreamState('live');
    applySnapshot((body && body.approvals) || [], body && body.next_cursor);
  } else if (type === 'approval') {
    applyChange(body);
  }
}

// ---- the fallback poll, only while the stream is down ----------------------

let pollGen = 0;
let polling = false;

function startPolling() {
  if (polling) return;
  polling = true;
  poll(++pollGen);
}

export function stopPolling() {
  polling = false;
  pollGen++;
}

async function poll(gen) {
  try {
    const data = await api('GET', `approvals?status=pending&limit=${INBOX_PAGE}`);
    if (gen !== pollGen) return;
    setProblem('approvals', null);
    applySnapshot((data && data.approvals) || [], data && data.next_cursor);
  } catch (err) {
    if (gen !== pollGen) return;
    setProblem('approvals', err.message);
    if (refused(err)) clearApprovals();
  }
  setTimeout(() => gen === pollGen && poll(gen), POLL_MS);
}
