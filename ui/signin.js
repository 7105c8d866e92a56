// Signing in: the start link's secret taken out of the address bar, or a
// token typed into the form at the top.

import { $, setProblem } from './dom.js';
import { VISIBLE_ASCII, getSecret, getToken, setSecret, setToken } from './api.js';

// Where the server sends an old start link, `/ui?secret=…` (src/http/ui.rs).
const OLD_LINK = 'old-start-link';

const OLD_LINK_TEXT = 'This page was opened with a start link of the old form, ' +
  '"approve at http://…/ui?secret=…", which no longer signs in: its secret was in the ' +
  'address sent to the server, and your browser\'s history still holds it. Open the link ' +
  'a current `skilld serve` prints, "approve at http://…/ui#secret=…", whose secret never ' +
  'leaves this page. Then delete the old address from the history, or, to be sure, stop ' +
  'the server, delete the file local-secret in its data directory and start it again for a new secret.';

/**
 * Takes a start link's secret (`#secret=…`) out of the address bar at
 * once, before any request, into this tab's storage; or says why an old
 * link (`?secret=…`, sent here by the server) no longer signs in. True
 * when the fragment was either.
 */
export function takeStartLink() {
  const fragment = location.hash.slice(1);
  const secret = new URLSearchParams(fragment).get('secret');
  if (secret === null && fragment !== OLD_LINK) return false;
  window.history.replaceState(null, '', location.pathname + location.search);
  if (secret === null) {
    setProblem('start-link', OLD_LINK_TEXT);
  } else if (!VISIBLE_ASCII.test(secret)) {
    setProblem('start-link', 'The link\'s secret is cut or changed: copy the whole link `skilld serve` printed.');
  } else {
    setSecret(secret);
    setProblem('start-link', null);
  }
  return true;
}

export function showTokenState(message, isError) {
  const state = $('#token-state');
  state.textContent = message || tokenState();
  state.classList.toggle('error', Boolean(isError));
}

function tokenState() {
  if (getSecret()) return 'Signed in with the local secret of the start link (kept in this tab until it closes).';
  return getToken() ? 'Token saved in this browser.' : 'No token set.';
}

/** The form as the page opens: the saved token in its field, and what signs in. */
export function showSignIn() {
  $('#token').value = getToken();
  showTokenState();
}

/** The form's two buttons; `reloadAll` reads everything again as the new token may. */
export function wireSignIn(reloadAll) {
  $('#token-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const token = $('#token').value.trim();
    if (token && !VISIBLE_ASCII.test(token)) {
      showTokenState('A token is visible ASCII with no spaces.', true);
      return;
    }
    setToken(token);
    // The token just typed is the one to use, not the start link's secret.
    if (token) setSecret('');
    showTokenState();
    reloadAll();
  });
  $('#token-clear').addEventListener('click', () => {
    setToken('');
    setSecret('');
    $('#token').value = '';
    showTokenState('Token forgotten.');
    reloadAll();
  });
}
