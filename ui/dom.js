// The page's DOM kit: building elements, the notices, the confirmation.
//
// Every piece of server data reaches the page through `textContent` or an
// attribute setter, never parsed as HTML: a tool's output, an argument or a
// skill's description is shown as text, however much it looks like markup.
// The server's Content-Security-Policy backs this up (no inline script).

export const $ = (sel) => document.querySelector(sel);

/** Builds an element; strings become text nodes, never markup. */
export function el(tag, attrs, ...children) {
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

/** Replaces a node's children; like `el`, skips what is not there. */
export function fill(node, parts) {
  node.replaceChildren(...parts.flat(Infinity).filter((p) => p !== undefined && p !== null && p !== false));
}

/** One term and its value in a `<dl>`. */
export function fact(term, ...value) {
  return [el('dt', { text: term }), el('dd', {}, ...value)];
}

// ---- notices -------------------------------------------------------------

export const UNAVAILABLE = 'Not shown: see the message above.';

/** The line a list shows instead of entries; null hides it. */
export function showEmpty(selector, message) {
  const line = $(selector);
  line.textContent = message || '';
  line.hidden = !message;
}

// One message per source (the stream, the runs, …), so one source's
// recovery does not hide another's failure.
const problems = new Map();

export function setProblem(source, message) {
  if (message) problems.set(source, message);
  else problems.delete(source);
  const messages = [...new Set(problems.values())];
  const notice = $('#notice');
  notice.replaceChildren(...messages.map((m) => el('p', { text: m })));
  notice.hidden = messages.length === 0;
  document.body.dataset.loaded = messages.length ? 'error' : 'ok';
}

let flashTimer = null;

export function flash(message, isError) {
  const box = $('#flash');
  box.textContent = message;
  box.classList.toggle('error', Boolean(isError));
  box.hidden = false;
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => {
    box.hidden = true;
  }, isError ? 15000 : 6000);
}

// ---- the in-page confirmation --------------------------------------------

/**
 * Asks before an action that outlives the click (a standing decision, a
 * revocation). A modal <dialog>: Escape or Cancel says no, and Cancel
 * has the focus, so a stray Enter says no too.
 */
export function confirmStep(title, text, okLabel, okClass) {
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

/** The dialog's two buttons close it with what they say. */
export function wireConfirm() {
  $('#confirm-ok').addEventListener('click', () => $('#confirm').close('ok'));
  $('#confirm-cancel').addEventListener('click', () => $('#confirm').close(''));
}
