// skilld approvals inbox: plain DOM, no framework, no build step.
//
// The page is ES modules served as they are, and this one starts them.
// One module per part of the page: signin.js (the start link, the token
// form), inbox.js (pending requests: approval-card.js draws a card,
// stream.js keeps them live, notify.js announces a new one),
// activations.js, egress.js (held destinations), uploads.js, runs.js,
// grants.js, history.js and views.js (the tabs). The kit they share:
// storage.js (what the browser keeps), api.js (the client and its bearer
// credential), dom.js, format.js and cards.js (the lists without a
// stream). Imports go one way: the kit imports no part, no module imports
// this one, and there is no cycle (tests/it/ui.rs checks).
//
// Every piece of server data reaches the page through `textContent` or an
// attribute setter, never parsed as HTML: a tool's output, an argument or a
// skill's description is shown as text, however much it looks like markup.
// The server's Content-Security-Policy backs this up (no inline script).

import { wireConfirm } from './dom.js';
import { age, fromNow } from './format.js';
import { showSignIn, showTokenState, takeStartLink, wireSignIn } from './signin.js';
import { showCount, wireKeys } from './inbox.js';
import { follow, stopPolling } from './stream.js';
import { showNotifyChoice, wireNotify } from './notify.js';
import { refreshRuns } from './runs.js';
import { refreshReviews } from './uploads.js';
import { refreshActivations } from './activations.js';
import { refreshEgress } from './egress.js';
import { wireHistory } from './history.js';
import { currentView, showView, wireViews } from './views.js';

/** Everything again, as the (new) token may see it; then `view`. */
function reloadAll(view = currentView()) {
  stopPolling();
  follow();
  refreshRuns();
  refreshReviews();
  refreshActivations();
  refreshEgress();
  showView(view);
}

function updateAges() {
  for (const node of document.querySelectorAll('.age[data-since]')) node.textContent = age(node.dataset.since);
  for (const node of document.querySelectorAll('.expires-in[data-until]')) node.textContent = `(${fromNow(node.dataset.until)})`;
}

/** A start link opened in this tab signs in again; any other hash is a view. */
function onHashChange() {
  if (!takeStartLink()) {
    showView(location.hash.slice(1));
    return;
  }
  showTokenState();
  reloadAll();
}

function wire() {
  wireSignIn(() => reloadAll());
  wireNotify();
  wireHistory();
  wireConfirm();
  wireViews();
  wireKeys();
  window.addEventListener('hashchange', onHashChange);
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) {
      refreshReviews();
      refreshActivations();
      refreshEgress();
    }
  });
  setInterval(updateAges, 30000);
}

function start() {
  takeStartLink();
  showSignIn();
  showNotifyChoice();
  showCount(0);
  wire();
  reloadAll(location.hash.slice(1));
}

start();
