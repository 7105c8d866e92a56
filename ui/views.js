// The three views behind the tabs: pending, decided, standing decisions.
// The address's fragment names the one shown (none for pending).

import { $ } from './dom.js';
import { loadGrants } from './grants.js';
import { loadHistory } from './history.js';

const VIEWS = ['pending', 'decided', 'grants'];
let view = 'pending';

/** The view shown. */
export const currentView = () => view;

/** Shows view `name` (pending for any other name) and reads what it lists. */
export function showView(name) {
  view = VIEWS.includes(name) ? name : 'pending';
  for (const tab of document.querySelectorAll('[role=tab]')) {
    const on = tab.dataset.view === view;
    tab.setAttribute('aria-selected', String(on));
    tab.tabIndex = on ? 0 : -1;
    $(`#${tab.getAttribute('aria-controls')}`).hidden = !on;
  }
  const hash = view === 'pending' ? '' : `#${view}`;
  if (location.hash !== hash) window.history.replaceState(null, '', hash || location.pathname + location.search);
  if (view === 'grants') loadGrants();
  if (view === 'decided') loadHistory(true);
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

export function wireViews() {
  for (const tab of document.querySelectorAll('[role=tab]')) {
    tab.addEventListener('click', () => showView(tab.dataset.view));
    tab.addEventListener('keydown', onTabKey);
  }
}
