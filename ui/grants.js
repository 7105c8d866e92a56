// Standing decisions: the grants listed, each revoked after a confirmation.

import { $, UNAVAILABLE, confirmStep, el, flash, setProblem, showEmpty } from './dom.js';
import { badge, hashPrefix, time, who } from './format.js';
import { api } from './api.js';

export async function loadGrants() {
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
