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
  const NOTIFY_KEY = 'skilld.notify';
  const TITLE = 'skilld inbox';
  const POLL_MS = 2000;
  const RUNS_BUSY_MS = 2000;
  const RUNS_IDLE_MS = 15000;
  const REVIEWS_MS = 5000;
  // The server sends a keep-alive every 15 s: a stream silent for longer is
  // dead even if no error says so (a proxy or a sleeping laptop).
  const SILENCE_MS = 45000;
  const BACKOFF_MS = [1000, 2000, 5000, 10000, 15000];
  const HISTORY_PAGE = 50;
  // The inbox's pages after the stream's first: as big as the API allows.
  const INBOX_PAGE = 500;
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
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // ---- what the browser keeps --------------------------------------------

  // localStorage can throw (storage disabled); the page then still works
  // for this visit with what it was told kept in memory.
  const memory = new Map();
  function recall(key) {
    try {
      return localStorage.getItem(key) || '';
    } catch {
      return memory.get(key) || '';
    }
  }
  function keep(key, value) {
    memory.set(key, value);
    try {
      if (value) localStorage.setItem(key, value);
      else localStorage.removeItem(key);
    } catch {
      /* kept in memory only */
    }
  }

  const getToken = () => recall(TOKEN_KEY);
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

  const refused = (err) => err.status === 401 || err.status === 403;

  /** The sentence a person reads for a failed call. */
  function describeProblem(status, problem) {
    const detail = (problem && (problem.detail || problem.title)) || '';
    const suffix = detail ? ` Server says: ${detail}` : '';
    if (status === 401 && problem && problem.code === 'local_secret_required') {
      // A server without tokens: the person who started it holds the link.
      return 'Not signed in (401): this server has no tokens, so approvals are for the person who ' +
        'started it. Open this page through the link `skilld serve` printed when it started ' +
        '("approve at http://…/ui?secret=…", also in its log); this browser then keeps the secret ' +
        'as a cookie. Or enter the secret from the file local-secret in the server\'s data ' +
        'directory above, as the token.';
    }
    if (status === 401) {
      return getToken()
        ? `Unauthorized (401): the server did not accept this token. Check it and save it again.${suffix}`
        : `Unauthorized (401): this server requires an API token. Enter one above (role "approve" to decide approvals).${suffix}`;
    }
    if (status === 403) return `Forbidden (403): ${detail || 'this token may not do that.'}`;
    const title = (problem && problem.title) || 'Request failed';
    return `${title} (${status})${detail && detail !== title ? `: ${detail}` : ''}`;
  }

  function authHeaders(accept) {
    const headers = { Accept: accept };
    const token = getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    return headers;
  }

  async function api(method, path, body) {
    const headers = authHeaders('application/json');
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(new URL(path, BASE), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
        credentials: 'same-origin',
      });
    } catch (err) {
      throw new ApiError(0, null, `Cannot reach skilld: ${err.message}`);
    }
    return answer(res);
  }

  async function answer(res) {
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
    return `$'${Array.from(word, escapeChar).join('')}'`;
  }
  function escapeChar(ch) {
    const code = ch.codePointAt(0);
    if (ch === '\\') return '\\\\';
    if (ch === "'") return "\\'";
    if (ch === '\n') return '\\n';
    if (ch === '\t') return '\\t';
    if (ch === '\r') return '\\r';
    if (code < 0x20 || code === 0x7f) return `\\x${code.toString(16).padStart(2, '0')}`;
    if (HIDDEN.test(ch)) return `\\u${code.toString(16).padStart(4, '0')}`;
    return ch;
  }
  /**
   * JSON with the same hiding characters written as \u escapes (still
   * valid JSON). JSON.stringify escapes every control character inside
   * strings, so a raw newline in its output is its own indentation: kept.
   */
  const safeJson = (value) =>
    JSON.stringify(value, null, 2).replace(new RegExp(HIDDEN.source, 'g'), (ch) =>
      ch === '\n' ? ch : `\\u${ch.codePointAt(0).toString(16).padStart(4, '0')}`);
  const commandLine = (argv) => (Array.isArray(argv) ? argv.map((w) => shellQuote(String(w))).join(' ') : '');
  /**
   * A value as JSON with object keys sorted at every depth: two calls with
   * the same arguments read the same whatever order their keys came in.
   */
  function canonicalJson(value) {
    if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
    if (value && typeof value === 'object') {
      return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
    }
    return JSON.stringify(value ?? null);
  }
  /** The arguments on one line, hiding characters escaped as in the details. */
  const argumentsLine = (value) =>
    canonicalJson(value ?? {}).replace(new RegExp(HIDDEN.source, 'g'), (ch) => `\\u${ch.codePointAt(0).toString(16).padStart(4, '0')}`);

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

  /** How long ago, in the fewest characters a compact card can spare. */
  function age(iso) {
    const minutes = Math.floor((Date.now() - new Date(iso).getTime()) / 60000);
    if (Number.isNaN(minutes)) return '';
    if (minutes < 1) return 'just now';
    if (minutes < 120) return `${minutes} min ago`;
    return minutes < 2880 ? `${Math.round(minutes / 60)} h ago` : `${Math.round(minutes / 1440)} d ago`;
  }

  function duration(ms) {
    if (typeof ms !== 'number') return '';
    return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  }

  function badge(kind, value) {
    return el('span', { class: `badge ${kind}-${value}`, text: String(value).replace(/_/g, ' ') });
  }

  const who = (name) => name || el('span', { class: 'muted', text: 'anonymous' });

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

  /** Replaces a node's children; like `el`, skips what is not there. */
  function fill(node, parts) {
    node.replaceChildren(...parts.flat(Infinity).filter((p) => p !== undefined && p !== null && p !== false));
  }

  function fact(term, ...value) {
    return [el('dt', { text: term }), el('dd', {}, ...value)];
  }

  const hashPrefix = (hash) => String(hash || '').slice(0, 12);

  // ---- notices -----------------------------------------------------------

  const UNAVAILABLE = 'Not shown: see the message above.';

  /** The line a list shows instead of entries; null hides it. */
  function showEmpty(selector, message) {
    const line = $(selector);
    line.textContent = message || '';
    line.hidden = !message;
  }

  // One message per source (the stream, the runs, …), so one source's
  // recovery does not hide another's failure.
  const problems = new Map();
  function setProblem(source, message) {
    if (message) problems.set(source, message);
    else problems.delete(source);
    const messages = [...new Set(problems.values())];
    const notice = $('#notice');
    notice.replaceChildren(...messages.map((m) => el('p', { text: m })));
    notice.hidden = messages.length === 0;
    document.body.dataset.loaded = messages.length ? 'error' : 'ok';
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

  // ---- the in-page confirmation ------------------------------------------

  /**
   * Asks before an action that outlives the click (a standing decision, a
   * revocation). A modal <dialog>: Escape or Cancel says no, and Cancel
   * has the focus, so a stray Enter says no too.
   */
  function confirmStep(title, text, okLabel, okClass) {
    const dialog = $('#confirm');
    if (dialog.open) return Promise.resolve(false);
    $('#confirm-title').textContent = title;
    $('#confirm-text').textContent = text;
    const ok = $('#confirm-ok');
    ok.textContent = okLabel;
    ok.className = okClass || '';
    dialog.returnValue = '';
    dialog.showModal();
    $('#confirm-cancel').focus();
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    });
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

  // ---- pending requests: the state ---------------------------------------

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

  function applySnapshot(list, nextCursor) {
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
  function applyChange(a) {
    if (!a || !a.id) return;
    read.told.add(a.id);
    if (a.status === 'pending') {
      pending.set(a.id, a);
      announce([a]);
    } else {
      pending.delete(a.id);
      if (a.scope === 'always' && currentView === 'grants') loadGrants();
      if (currentView === 'decided') historySoon();
    }
    renderApprovals();
    scheduleRuns();
  }

  function clearApprovals() {
    read.gen++;
    pending.clear();
    blocked = true;
    renderApprovals();
  }

  function announce(list, quiet) {
    const fresh = list.filter((a) => !known.has(a.id));
    fresh.forEach((a) => known.add(a.id));
    if (primed && !quiet) fresh.forEach(notify);
    primed = true;
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

  // ---- pending requests: the cards ---------------------------------------

  /** Cards by group key, kept across updates so a note being typed survives. */
  const cards = new Map();
  const cardOf = new WeakMap();
  let cardCount = 0;

  function createCard(key, first) {
    const id = `card-${++cardCount}`;
    const card = { key, id, members: [], allIds: [], signature: '', open: false, busy: false };
    const chevron = el('span', { class: 'chevron', 'aria-hidden': 'true' });
    card.toggle = el('button', { type: 'button', class: 'toggle plain', 'aria-expanded': 'false', 'aria-controls': `${id}-details` }, chevron, 'Details');
    card.toggle.addEventListener('click', () => setOpen(card, !card.open));
    card.all = el('button', { type: 'button', class: 'approve all', hidden: true });
    card.all.addEventListener('click', () => approveAll(card));
    card.summary = el('span', { class: 'summary' });
    card.error = el('p', { class: 'action-error', role: 'alert', hidden: true });
    card.info = el('div', { class: 'info' });
    card.details = el('div', { class: 'details', id: `${id}-details`, hidden: true }, card.info, decidePart(card, first));
    card.article = el(
      'article',
      { class: 'approval', role: 'row', tabindex: '-1', 'aria-selected': 'false', 'aria-labelledby': `${id}-title` },
      el('div', { class: 'cell', role: 'gridcell' }, headPart(card, first), card.error, card.details),
    );
    card.article.addEventListener('click', () => select(card, false));
    cards.set(key, card);
    cardOf.set(card.article, card);
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

  function decidePart(card, a) {
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
      button.addEventListener('click', () => decideCard(card, action, scope));
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
  function updateCard(card, members) {
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

  function setOpen(card, open) {
    card.open = open;
    card.details.hidden = !open;
    card.toggle.setAttribute('aria-expanded', String(open));
    card.article.classList.toggle('open', open);
  }

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
      const card = cards.get(key) || createCard(key, members[0]);
      updateCard(card, members);
      // Move only what is out of place: moving a node blurs the note being typed.
      if (container.children[i] !== card.article) container.insertBefore(card.article, container.children[i] || null);
    });
    showCount(pending.size);
    const empty = blocked ? UNAVAILABLE : 'Nothing is waiting for a decision.';
    showEmpty('#approvals-empty', pending.size ? null : empty);
    keepSelection();
  }

  function showCount(n) {
    $('#approvals-count').textContent = n ? `(${n})` : '';
    $('#tab-count').textContent = n ? `(${n})` : '';
    document.title = n ? `(${n}) ${TITLE}` : TITLE;
  }

  // ---- pending requests: deciding ----------------------------------------

  async function decide(a, action, scope, note) {
    await api('POST', `approvals/${encodeURIComponent(a.id)}/${action}`, { scope, note });
    read.told.add(a.id);
    if (pending.delete(a.id)) renderApprovals();
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

  // ---- pending requests: selection and keys ------------------------------

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
    if (currentView !== 'pending' || $('#confirm').open) return;
    if (event.target instanceof Element && event.target.closest(TYPING)) return;
    let action = KEYS[event.key];
    if (event.key === 'Enter' && event.target instanceof Element && event.target.matches('article.approval')) action = KEYS.o;
    if (!action) return;
    event.preventDefault();
    action();
  }

  // ---- notifications -----------------------------------------------------

  const canNotify = () => 'Notification' in window;

  function notify(a) {
    if (!$('#notify').checked || !canNotify() || Notification.permission !== 'granted') return;
    try {
      const note = new Notification(`Approval requested: ${a.skill} / ${a.tool}`, {
        body: `${commandLine(a.argv).slice(0, 200)}\n${argumentsLine(a.arguments).slice(0, 200)}\nby ${a.requested_by || 'anonymous'}`,
        tag: `skilld-${a.id}`,
      });
      note.addEventListener('click', () => {
        window.focus();
        showView('pending');
        const card = [...cards.values()].find((c) => c.allIds.includes(a.id));
        if (card) select(card, true);
        note.close();
      });
    } catch {
      /* a browser that only notifies from a service worker: the title still counts */
    }
  }

  async function onNotifyChange() {
    const box = $('#notify');
    const say = (text, isError) => {
      $('#notify-state').textContent = text;
      $('#notify-state').classList.toggle('error', Boolean(isError));
    };
    if (box.checked && !canNotify()) {
      box.checked = false;
      say('This browser cannot show notifications.', true);
    } else if (box.checked && (await Notification.requestPermission()) !== 'granted') {
      box.checked = false;
      say('Notifications are blocked for this page in the browser settings.', true);
    } else {
      say(box.checked ? 'On: one per new request.' : '');
    }
    keep(NOTIFY_KEY, box.checked ? '1' : '');
  }

  // ---- the live stream ---------------------------------------------------

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
  async function follow() {
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
        credentials: 'same-origin',
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

  // ---- the fallback poll, only while the stream is down ------------------

  let pollGen = 0;
  let polling = false;

  function startPolling() {
    if (polling) return;
    polling = true;
    poll(++pollGen);
  }

  function stopPolling() {
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

  // ---- uploads waiting for review ----------------------------------------

  // `GET /reviews` has no stream: it is read every few seconds while the
  // page is in view, at once when it comes back into view, and after each
  // decision made here.

  /**
   * Characters that hide or disguise the text of a file under review
   * (controls, bidi overrides and isolates, zero-width characters, line
   * and paragraph separators). Tabs and newlines are a file's own.
   */
  const DISGUISE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

  /** Text as nodes, each hiding character shown as a marked `\uXXXX`: the reviewer reads what the file holds. */
  function revealed(value) {
    const text = String(value ?? '');
    const parts = [];
    let last = 0;
    for (const match of text.matchAll(DISGUISE)) {
      if (match.index > last) parts.push(text.slice(last, match.index));
      const code = match[0].codePointAt(0).toString(16).padStart(4, '0');
      parts.push(el('span', { class: 'hidden-char', title: `U+${code.toUpperCase()}, invisible or reordering`, text: `\\u${code}` }));
      last = match.index + match[0].length;
    }
    if (last < text.length) parts.push(text.slice(last));
    return parts;
  }

  const enc = encodeURIComponent;
  const reviewKey = (r) => `${r.skill}@${r.version}`;
  const reviewPath = (r) => `skills/${enc(r.skill)}@${enc(r.version)}`;

  function size(bytes) {
    if (typeof bytes !== 'number') return '';
    return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(bytes < 10240 ? 1 : 0)} KiB`;
  }

  /**
   * A list with no stream (`GET path`), read now and then every
   * REVIEWS_MS while the page is in view; a newer read supersedes an older
   * one. `entries(data)` picks the list out of an answer for `render`. A
   * refusal (401, 403) empties the list, since what this token may not see
   * is not left on screen from an earlier one; it is a problem to show
   * unless `quietRefusal` (the token's role, not a failure). `refused`
   * says whether the last read was refused.
   */
  function polledList(path, entries, render, quietRefusal) {
    const list = { gen: 0, timer: null, refused: false };
    async function load(gen) {
      try {
        const data = await api('GET', path);
        if (gen !== list.gen) return;
        setProblem(path, null);
        list.refused = false;
        render(entries(data));
      } catch (err) {
        if (gen !== list.gen) return;
        list.refused = refused(err);
        setProblem(path, list.refused && quietRefusal ? null : err.message);
        if (list.refused) render([]);
      }
    }
    list.refresh = () => {
      clearTimeout(list.timer);
      const gen = ++list.gen;
      const next = () => {
        if (gen === list.gen) list.timer = setTimeout(list.refresh, REVIEWS_MS);
      };
      if (document.hidden) next();
      else load(gen).finally(next);
    };
    return list;
  }

  /**
   * Keeps `cards` (by key) to the entries of `wanted` in its order: a new
   * entry gets a card from `create`, each card is `update`d, a card of no
   * entry goes, and only what is out of place moves (moving a node blurs
   * the note being typed).
   */
  function placeCards(container, cards, wanted, create, update) {
    for (const [key, card] of cards) if (!wanted.has(key)) dropCard(cards, card);
    [...wanted].forEach(([key, entry], i) => {
      const card = cards.get(key) || create(key, entry);
      update(card, entry);
      if (container.children[i] !== card.article) container.insertBefore(card.article, container.children[i] || null);
    });
  }

  function dropCard(cards, card) {
    card.article.remove();
    cards.delete(card.key);
  }

  /**
   * Sends a decision from a card with a note (review or activation): the
   * card is busy meanwhile, `done` runs once `send(note)` succeeds, the
   * error shows on the card if not, and `after` runs either way.
   */
  async function decideFromCard(card, name, send, done, after) {
    if (card.busy) return;
    card.busy = true;
    card.error.hidden = true;
    card.article.classList.add('busy');
    card.buttons.forEach((b) => { b.disabled = true; });
    try {
      await send(card.note.value.trim() || undefined);
      done();
    } catch (err) {
      card.error.textContent = err.message;
      card.error.hidden = false;
      flash(`${name}: ${err.message}`, true);
    } finally {
      card.busy = false;
      card.article.classList.remove('busy');
      card.buttons.forEach((b) => { b.disabled = false; });
      after();
    }
  }

  /** Review cards by `skill@version`, kept across reads so a note being typed survives. */
  const reviewCards = new Map();
  let reviewCount = 0;
  const reviews = polledList(
    'reviews',
    (data) => (data && Array.isArray(data.reviews) ? data.reviews : []),
    (list) => renderReviews(list),
    false,
  );
  const refreshReviews = () => reviews.refresh();

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

  // ---- skills asking to activate -----------------------------------------

  // `GET /activations` (the approve role) has no stream either: it is read
  // like the reviews. A token without the role sees a line saying so, not
  // a failure: deciding activations is not its business.

  const activationKey = (p) => `${p.session}/${p.skill}`;
  /** Activation cards by `session/skill`, kept across reads so a note being typed survives. */
  const activationCards = new Map();
  let activationCount = 0;
  // A refusal is the token's role (the other lists say a 401 already).
  const activations = polledList(
    'activations',
    (data) => (data && Array.isArray(data.items) ? data.items : []),
    (list) => renderActivations(list),
    true,
  );
  const refreshActivations = () => activations.refresh();

  function renderActivations(list) {
    const wanted = new Map(list.filter((p) => p && p.session && p.skill).map((p) => [activationKey(p), p]));
    const update = (card, p) => { card.request = p; };
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
      { class: 'review activation', 'aria-labelledby': `${id}-title`, 'data-activation': key },
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
      (note) => api('POST', `sessions/${enc(p.session)}/activations/${enc(p.skill)}`, { decision, note }),
      () => {
        dropCard(activationCards, card);
        showActivationCount();
        flash(`${said}: ${p.skill}.`, false);
      },
      refreshActivations,
    );
  }

  // ---- runs --------------------------------------------------------------

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

  function refreshRuns() {
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

  function scheduleRuns() {
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

  // ---- standing decisions ------------------------------------------------

  async function loadGrants() {
    try {
      const data = await api('GET', 'grants');
      renderGrants((data && data.grants) || []);
      setProblem('grants', null);
    } catch (err) {
      setProblem('grants', err.message);
      $('#grants-body').replaceChildren();
      $('#grants-table').hidden = true;
      showEmpty('#grants-empty', UNAVAILABLE);
    }
  }

  function renderGrants(list) {
    $('#grants-body').replaceChildren(...list.map(grantRow));
    $('#grants-table').hidden = list.length === 0;
    showEmpty('#grants-empty', list.length ? null : 'No standing decisions: every call that needs a person asks one.');
  }

  function grantRow(g) {
    const revoke = el('button', { type: 'button', class: 'deny always small', 'aria-label': `Revoke ${g.decision} for ${g.skill} / ${g.tool}`, text: 'Revoke' });
    revoke.addEventListener('click', () => revokeGrant(g, revoke));
    return el(
      'tr',
      { class: 'grant', 'data-grant-id': g.id, 'data-decision': g.decision },
      el('td', { class: 'skill', text: g.skill }),
      el('td', { class: 'tool', text: g.tool }),
      el('td', {}, el('code', { class: 'hash', title: g.skill_hash, text: hashPrefix(g.skill_hash) })),
      el('td', {}, badge('grant', g.decision)),
      el('td', { class: 'by' }, who(g.created_by)),
      el('td', {}, time(g.created_at)),
      el('td', {}, revoke),
    );
  }

  async function revokeGrant(g, button) {
    const now = g.decision === 'allow' ? 'run' : 'are refused';
    const ok = await confirmStep(
      'Revoke this standing decision?',
      `Calls of ${g.tool} from ${g.skill} (version ${hashPrefix(g.skill_hash)}) now ${now} without asking. ` +
        'Once revoked, each call asks a person again.',
      'Revoke',
      'deny',
    );
    if (!ok) return;
    button.disabled = true;
    try {
      await api('DELETE', `grants/${encodeURIComponent(g.id)}`);
      flash(`Revoked the standing ${g.decision} of ${g.skill} / ${g.tool}.`, false);
    } catch (err) {
      flash(`${g.skill} / ${g.tool}: ${err.message}`, true);
    }
    loadGrants();
  }

  // ---- history -----------------------------------------------------------

  const past = { seq: 0, cursor: null, skill: '', tool: '', paged: false, soon: null };

  // A decision made while the view is open shows at its top, unless older
  // pages were opened: redrawing would lose the person's place.
  function historySoon() {
    if (past.paged) return;
    clearTimeout(past.soon);
    past.soon = setTimeout(() => loadHistory(true), 300);
  }

  /** The newest page (`fresh`), or the next older one after what is shown. */
  async function loadHistory(fresh) {
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

  function onHistoryFilter(event) {
    event.preventDefault();
    const form = event.target;
    past.skill = form.elements.skill.value.trim();
    past.tool = form.elements.tool.value.trim();
    loadHistory(true);
  }

  // ---- views -------------------------------------------------------------

  const VIEWS = ['pending', 'decided', 'grants'];
  let currentView = 'pending';

  function showView(name) {
    currentView = VIEWS.includes(name) ? name : 'pending';
    for (const tab of document.querySelectorAll('[role=tab]')) {
      const on = tab.dataset.view === currentView;
      tab.setAttribute('aria-selected', String(on));
      tab.tabIndex = on ? 0 : -1;
      $(`#${tab.getAttribute('aria-controls')}`).hidden = !on;
    }
    const hash = currentView === 'pending' ? '' : `#${currentView}`;
    if (location.hash !== hash) window.history.replaceState(null, '', hash || location.pathname + location.search);
    if (currentView === 'grants') loadGrants();
    if (currentView === 'decided') loadHistory(true);
  }

  /** Arrow keys between tabs, as the ARIA tabs pattern has it. */
  function onTabKey(event) {
    const tabs = [...document.querySelectorAll('[role=tab]')];
    const at = tabs.indexOf(event.target);
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (at < 0 || !step) return;
    event.preventDefault();
    const next = tabs[(at + step + tabs.length) % tabs.length];
    next.focus();
    showView(next.dataset.view);
  }

  // ---- start -------------------------------------------------------------

  function onTokenSubmit(event) {
    event.preventDefault();
    const token = $('#token').value.trim();
    // An Authorization header carries visible ASCII only; anything else
    // would fail every call with a confusing network error.
    if (token && !/^[\x21-\x7e]+$/.test(token)) {
      showTokenState('A token is visible ASCII with no spaces.', true);
      return;
    }
    keep(TOKEN_KEY, token);
    showTokenState(token ? 'Token saved in this browser.' : 'No token set.');
    reloadAll();
  }

  function onTokenClear() {
    keep(TOKEN_KEY, '');
    $('#token').value = '';
    showTokenState('Token forgotten.');
    reloadAll();
  }

  /** Everything again, as the (new) token may see it. */
  function reloadAll() {
    stopPolling();
    follow();
    refreshRuns();
    refreshReviews();
    refreshActivations();
    showView(currentView);
  }

  function updateAges() {
    for (const node of document.querySelectorAll('.age[data-since]')) node.textContent = age(node.dataset.since);
    for (const node of document.querySelectorAll('.expires-in[data-until]')) node.textContent = `(${fromNow(node.dataset.until)})`;
  }

  function wire() {
    $('#token-form').addEventListener('submit', onTokenSubmit);
    $('#token-clear').addEventListener('click', onTokenClear);
    $('#notify').addEventListener('change', onNotifyChange);
    $('#history-filter').addEventListener('submit', onHistoryFilter);
    $('#history-older').addEventListener('click', () => loadHistory(false));
    $('#confirm-ok').addEventListener('click', () => $('#confirm').close('ok'));
    $('#confirm-cancel').addEventListener('click', () => $('#confirm').close(''));
    for (const tab of document.querySelectorAll('[role=tab]')) {
      tab.addEventListener('click', () => showView(tab.dataset.view));
      tab.addEventListener('keydown', onTabKey);
    }
    document.addEventListener('keydown', onKey);
    window.addEventListener('hashchange', () => showView(location.hash.slice(1)));
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) {
        refreshReviews();
        refreshActivations();
      }
    });
    setInterval(updateAges, 30000);
  }

  function start() {
    $('#token').value = getToken();
    showTokenState();
    $('#notify').checked = recall(NOTIFY_KEY) === '1' && canNotify() && Notification.permission === 'granted';
    showCount(0);
    wire();
    currentView = location.hash.slice(1);
    reloadAll();
  }

  start();
})();
