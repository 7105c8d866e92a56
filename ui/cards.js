// What the lists without a stream share (the uploads, the activations):
// a list read every few seconds, cards kept in place across reads, and a
// decision sent from a card with a note.

import { flash, setProblem } from './dom.js';
import { api, refused } from './api.js';

const REVIEWS_MS = 5000;

/**
 * A list with no stream (`GET path`), read now and then every
 * REVIEWS_MS while the page is in view; a newer read supersedes an older
 * one. `entries(data)` picks the list out of an answer for `render`. A
 * refusal (401, 403) empties the list, since what this token may not see
 * is not left on screen from an earlier one; it is a problem to show
 * unless `quietRefusal` (the token's role, not a failure). `refused`
 * says whether the last read was refused.
 */
export function polledList(path, entries, render, quietRefusal) {
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
export function placeCards(container, cards, wanted, create, update) {
  for (const [key, card] of cards) if (!wanted.has(key)) dropCard(cards, card);
  [...wanted].forEach(([key, entry], i) => {
    const card = cards.get(key) || create(key, entry);
    update(card, entry);
    if (container.children[i] !== card.article) container.insertBefore(card.article, container.children[i] || null);
  });
}

export function dropCard(cards, card) {
  card.article.remove();
  cards.delete(card.key);
}

/**
 * Sends a decision from a card with a note (review or activation): the
 * card is busy meanwhile, `done` runs once `send(note)` succeeds, the
 * error shows on the card if not, and `after` runs either way.
 */
export async function decideFromCard(card, name, send, done, after) {
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
