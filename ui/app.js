// skilld approvals inbox: plain DOM, no framework, no build step.
//
// Every piece of server data reaches the page through `textContent` or an
// attribute setter, never parsed as HTML: a tool's output, an argument or a
// skill's description is shown as text, however much it looks like markup.
// The server's Content-Security-Policy backs this up (no inline script).
'use strict';

(() => {
  // The script is served at <base>/ui/app.js; the API lives at <base>/, so a
  // skilld behind a path prefix still works.
  const BASE = new URL('../', document.currentScript.src);
  const TOKEN_KEY = 'skilld.token';
  const REFRESH_MS = 2000;
  const FINISHED = new Set([
    'succeeded', 'failed', 'timed_out', 'cancelled', 'denied', 'expired', 'interrupted',
  ]);

  const $ = (sel) => document.querySelector(sel);

  /** Builds an element; strings become text nodes, never markup. */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'text') node.textContent = value;
      else if (key.startsWith('data-')) node.setAttribute(key, String(value));
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // ---- the token ---------------------------------------------------------

  // localStorage can throw (storage disabled); the page then still works
  // for this visit with the token kept in memory.
  let memoryToken = '';
  function getToken() {
    try {
      return localStorage.getItem(TOKEN_KEY) || '';
    } catch {
      return memoryToken;
    }
  }
  function setToken(token) {
    memoryToken = token;
    try {
      if (token) localStorage.setItem(TOKEN_KEY, token);
      else localStorage.removeItem(TOKEN_KEY);
    } catch {
      /* kept in memory only */
    }
  }
  function showTokenState(message, isError) {
    const state = $('#token-state');
    state.textContent = message || (getToken() ? 'Token saved in this browser.' : 'No token set.');
    state.classList.toggle('error', Boolean(isError));
  }

  // ---- the API -----------------------------------------------------------

  class ApiError extends Error {
    constructor(status, problem, message) {
      super(message);
      this.status = status;
      this.problem = problem;
    }
  }

  /** The sentence a person reads for a failed call. */
  function describeProblem(status, problem) {
    const detail = (problem && (problem.detail || problem.title)) || '';
    const suffix = detail ? ` Server says: ${detail}` : '';
    if (status === 401) {
      return getToken()
        ? `Unauthorized (401): the server did not accept this token. Check it and save it again.${suffix}`
        : `Unauthorized (401): this server requires an API token. Enter one above (role "approve" to decide approvals).${suffix}`;
    }
    if (status === 403) return `Forbidden (403): ${detail || 'this token may not do that.'}`;
    const title = (problem && problem.title) || 'Request failed';
    return `${title} (${status})${detail && detail !== title ? `: ${detail}` : ''}`;
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const token = getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(new URL(path, BASE), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
        credentials: 'omit',
      });
    } catch (err) {
      throw new ApiError(0, null, `Cannot reach skilld: ${err.message}`);
    }
    const text = await res.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!res.ok) throw new ApiError(res.status, data, describeProblem(res.status, data));
    return data;
  }

  // ---- rendering helpers -------------------------------------------------

  /**
   * argv as a POSIX shell would need it typed: what a person reads as the
   * exact command. Words that need it are single-quoted; characters that
   * hide or disguise text (controls, C1 controls, bidi overrides and
   * isolates, zero-width characters, line and paragraph separators) are
   * shown as $'\n'-style escapes, so the preview cannot be made to read
   * as something other than what runs.
   */
  const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/;
  function shellQuote(word) {
    if (word === '') return "''";
    if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
    if (!HIDDEN.test(word)) return `'${word.replace(/'/g, "'\\''")}'`;
    const escaped = Array.from(word, (ch) => {
      const code = ch.codePointAt(0);
      if (ch === '\\') return '\\\\';
      if (ch === "'") return "\\'";
      if (ch === '\n') return '\\n';
      if (ch === '\t') return '\\t';
      if (ch === '\r') return '\\r';
      if (code < 0x20 || code === 0x7f) return `\\x${code.toString(16).padStart(2, '0')}`;
      if (HIDDEN.test(ch)) return `\\u${code.toString(16).padStart(4, '0')}`;
      return ch;
    }).join('');
    return `$'${escaped}'`;
  }
  const commandLine = (argv) => (Array.isArray(argv) ? argv.map((w) => shellQuote(String(w))).join(' ') : '');

  function time(iso) {
    if (!iso) return el('span', { class: 'muted', text: '—' });
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return el('span', { text: iso });
    const sameDay = date.toDateString() === new Date().toDateString();
    return el('time', {
      datetime: iso,
      title: iso,
      text: sameDay ? date.toLocaleTimeString() : date.toLocaleString(),
    });
  }

  function fromNow(iso) {
    const ms = new Date(iso).getTime() - Date.now();
    if (Number.isNaN(ms)) return '';
    const minutes = Math.round(Math.abs(ms) / 60000);
    const span = minutes < 1 ? 'less than a minute' : minutes < 120 ? `${minutes} min` : `${Math.round(minutes / 60)} h`;
    return ms >= 0 ? `in ${span}` : `${span} ago`;
  }

  function duration(ms) {
    if (typeof ms !== 'number') return '';
    return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  }

  function badge(kind, value) {
    return el('span', { class: `badge ${kind}-${value}`, text: String(value).replace(/_/g, ' ') });
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

  function fact(term, ...value) {
    return [el('dt', { text: term }), el('dd', {}, ...value)];
  }

  // ---- notices -----------------------------------------------------------

  const UNAVAILABLE = 'Not shown: see the message above.';

  /** The line a list shows instead of entries; null hides it. */
  function showEmpty(selector, message) {
    const line = $(selector);
    line.textContent = message || '';
    line.hidden = !message;
  }

  function showNotice(messages) {
    const notice = $('#notice');
    notice.replaceChildren(...messages.map((m) => el('p', { text: m })));
    notice.hidden = messages.length === 0;
  }

  let flashTimer = null;
  function flash(message, isError) {
    const box = $('#flash');
    box.textContent = message;
    box.classList.toggle('error', Boolean(isError));
    box.hidden = false;
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => {
      box.hidden = true;
    }, isError ? 15000 : 6000);
  }

  // ---- approvals ---------------------------------------------------------

  /** Articles by approval id, kept across refreshes so a note being typed survives. */
  const approvalEls = new Map();

  function approvalArticle(a) {
    const titleId = `approval-${a.id}-title`;
    const note = el('input', {
      type: 'text',
      class: 'note',
      name: 'note',
      maxlength: '1000',
      placeholder: 'why (kept with the decision)',
      'aria-label': `Note for ${a.skill} / ${a.tool}`,
    });
    const error = el('p', { class: 'action-error', role: 'alert', hidden: true });
    const buttons = [
      ['approve', 'once', 'Approve once'],
      ['approve', 'always', 'Approve always'],
      ['deny', 'once', 'Deny once'],
      ['deny', 'always', 'Deny always'],
    ].map(([action, scope, label]) => {
      const button = el('button', {
        type: 'button',
        class: `${action} ${scope}`,
        'data-action': action,
        'data-scope': scope,
        title:
          scope === 'always'
            ? `${action === 'approve' ? 'Allow' : 'Refuse'} every call of this tool until the skill changes`
            : `${action === 'approve' ? 'Run' : 'Refuse'} this call only`,
        text: label,
      });
      button.addEventListener('click', () => decide(a, article, action, scope));
      return button;
    });

    const hash = a.skill_hash ? String(a.skill_hash) : '';
    const article = el(
      'article',
      { class: 'approval', 'data-approval-id': a.id, 'data-run-id': a.run_id, 'aria-labelledby': titleId },
      el(
        'header',
        { class: 'approval-head' },
        el('h3', { id: titleId }, el('span', { class: 'skill', text: a.skill }), ' / ', el('span', { class: 'tool', text: a.tool })),
        a.trust ? badge('trust', a.trust) : null,
      ),
      a.description ? el('p', { class: 'description', text: a.description }) : null,
      a.warning ? el('p', { class: 'warning' }, el('strong', { text: 'Warning: ' }), a.warning) : null,
      callerLeft(a),
      el('p', { class: 'label', text: 'Command that will run' }),
      el('pre', { class: 'argv', 'aria-label': 'Command preview' }, el('code', { text: commandLine(a.argv) })),
      el(
        'dl',
        { class: 'facts' },
        fact('Working directory', el('code', { text: a.cwd || '' })),
        fact('Mode', el('code', { text: a.mode || 'Global' })),
        fact('Arguments', el('pre', { class: 'arguments', text: JSON.stringify(a.arguments ?? {}, null, 2) })),
        fact('Requested by', a.requested_by || el('span', { class: 'muted', text: 'anonymous' })),
        fact('Requested', time(a.created_at)),
        fact('Expires', time(a.expires_at), ' ', el('span', { class: 'muted expires-in', text: a.expires_at ? `(${fromNow(a.expires_at)})` : '' })),
        hash ? fact('Skill hash', el('code', { title: hash, text: hash.length > 16 ? `${hash.slice(0, 16)}…` : hash })) : null,
      ),
      el(
        'div',
        { class: 'decide' },
        el('label', { class: 'note-label' }, el('span', { text: 'Note (optional)' }), note),
        el('div', { class: 'buttons' }, buttons),
        error,
      ),
    );
    return article;
  }

  function renderApprovals(list) {
    // Oldest first, as the server sends them; sorting again (stable, by the
    // parsed time: fractional digits vary in length) keeps it so regardless.
    const at = (a) => Date.parse(a.created_at) || 0;
    const sorted = [...list].sort((x, y) => at(x) - at(y));
    const container = $('#approvals');
    const wanted = new Set(sorted.map((a) => a.id));
    for (const [id, article] of approvalEls) {
      if (!wanted.has(id) && !article.classList.contains('busy')) {
        article.remove();
        approvalEls.delete(id);
      }
    }
    sorted.forEach((a, i) => {
      let article = approvalEls.get(a.id);
      if (!article) {
        article = approvalArticle(a);
        approvalEls.set(a.id, article);
      } else {
        const left = article.querySelector('.expires-in');
        if (left && a.expires_at) left.textContent = `(${fromNow(a.expires_at)})`;
        if (a.caller_left_at && !article.querySelector('.caller-left')) {
          article.querySelector('.argv').previousElementSibling.before(callerLeft(a));
        }
      }
      // Move only what is out of place: moving a node blurs the note being typed.
      if (container.children[i] !== article) container.insertBefore(article, container.children[i] || null);
    });
    $('#approvals-count').textContent = sorted.length ? `(${sorted.length})` : '';
    showEmpty('#approvals-empty', sorted.length ? null : 'Nothing is waiting for a decision.');
  }

  function clearApprovals() {
    for (const article of approvalEls.values()) article.remove();
    approvalEls.clear();
    $('#approvals-count').textContent = '';
    showEmpty('#approvals-empty', UNAVAILABLE);
  }

  async function decide(a, article, action, scope) {
    const error = article.querySelector('.action-error');
    const buttons = article.querySelectorAll('button');
    const note = article.querySelector('.note').value.trim();
    error.hidden = true;
    article.classList.add('busy');
    buttons.forEach((b) => {
      b.disabled = true;
    });
    try {
      await api('POST', `approvals/${encodeURIComponent(a.id)}/${action}`, { scope, note });
      const verb = action === 'approve' ? 'Approved' : 'Denied';
      flash(`${verb} ${scope === 'always' ? 'always' : 'once'}: ${a.skill} / ${a.tool}.`, false);
      article.remove();
      approvalEls.delete(a.id);
    } catch (err) {
      error.textContent = err.message;
      error.hidden = false;
      flash(`${a.skill} / ${a.tool}: ${err.message}`, true);
    } finally {
      article.classList.remove('busy');
      buttons.forEach((b) => {
        b.disabled = false;
      });
      refresh();
    }
  }

  // ---- runs --------------------------------------------------------------

  /** Rows by run id with what they were drawn from, redrawn only on change. */
  const runRows = new Map();

  function runSignature(r) {
    return JSON.stringify([r.status, r.started_at, r.finished_at, Boolean(r.result)]);
  }

  function runRow(r) {
    const result = r.result && typeof r.result === 'object' ? r.result : null;
    const finished = FINISHED.has(r.status);
    let output;
    if (result) {
      const text = typeof result.output === 'string' ? result.output : '';
      output = el(
        'div',
        { class: 'output-cell' },
        result.error ? el('p', { class: 'run-error', text: result.error }) : null,
        text
          ? el('pre', { class: 'output', text })
          : el('span', { class: 'muted output', text: '(no output)' }),
        result.truncated
          ? el('p', { class: 'muted', text: `truncated: ${result.output_bytes} bytes in all` })
          : null,
      );
    } else {
      output = el('span', { class: 'muted', text: finished ? '—' : 'not finished' });
    }
    const exit =
      result && result.exit_code !== undefined && result.exit_code !== null
        ? el('span', {}, el('code', { class: 'exit-code', text: String(result.exit_code) }), result.signal ? ` (${result.signal})` : '')
        : el('span', { class: 'muted', text: '—' });
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
      el('td', {}, r.requested_by || el('span', { class: 'muted', text: 'anonymous' })),
      el('td', {}, time(r.created_at)),
      el(
        'td',
        {},
        r.finished_at ? time(r.finished_at) : el('span', { class: 'muted', text: finished ? '—' : 'not yet' }),
        result && typeof result.duration_ms === 'number'
          ? el('span', { class: 'muted' }, el('br'), duration(result.duration_ms))
          : null,
      ),
      el('td', {}, exit),
      el('td', {}, output),
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
        entry = { row, signature };
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

  // ---- the refresh loop --------------------------------------------------

  let inFlight = null;
  let again = false;
  let timer = null;

  /** Loads both lists; a call while one is in flight runs once more after it. */
  function refresh() {
    if (inFlight) {
      again = true;
      return inFlight;
    }
    clearTimeout(timer);
    inFlight = load().finally(() => {
      inFlight = null;
      if (again) {
        again = false;
        refresh();
      } else {
        timer = setTimeout(refresh, REFRESH_MS);
      }
    });
    return inFlight;
  }

  async function load() {
    const [approvals, runs] = await Promise.allSettled([
      api('GET', 'approvals?status=pending'),
      api('GET', 'runs?limit=20'),
    ]);
    const messages = [];
    const failed = (outcome, clear) => {
      const err = outcome.reason;
      if (!messages.includes(err.message)) messages.push(err.message);
      // What this token may not see is not left on screen from an earlier one.
      if (err.status === 401 || err.status === 403) clear();
    };
    if (approvals.status === 'fulfilled') renderApprovals((approvals.value && approvals.value.approvals) || []);
    else failed(approvals, clearApprovals);
    if (runs.status === 'fulfilled') renderRuns((runs.value && runs.value.runs) || []);
    else failed(runs, clearRuns);
    showNotice(messages);
    document.body.dataset.loaded = messages.length ? 'error' : 'ok';
    $('#refreshed').textContent = `Updated ${new Date().toLocaleTimeString()}`;
  }

  // ---- start -------------------------------------------------------------

  function start() {
    const input = $('#token');
    input.value = getToken();
    showTokenState();
    $('#token-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const token = input.value.trim();
      // An Authorization header carries visible ASCII only; anything else
      // would fail every call with a confusing network error.
      if (token && !/^[\x21-\x7e]+$/.test(token)) {
        showTokenState('A token is visible ASCII with no spaces.', true);
        return;
      }
      setToken(token);
      showTokenState(token ? 'Token saved in this browser.' : 'No token set.');
      refresh();
    });
    $('#token-clear').addEventListener('click', () => {
      setToken('');
      input.value = '';
      showTokenState('Token forgotten.');
      refresh();
    });
    refresh();
  }

  start();
})();
