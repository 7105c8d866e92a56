// What the browser keeps for the page.
//
// A typed token goes to localStorage, kept until forgotten. The start
// link's secret goes to sessionStorage: this origin's alone (scheme, host
// and port), this tab's alone, kept across a reload and gone with the
// tab. Never to a cookie, which a browser sends to every port of a host.

const lasting = () => localStorage;
export const tabOnly = () => sessionStorage;

// Storage can throw (disabled); the page then still works for this visit
// with what it was told kept in memory.
const memory = new Map();

export function recall(key, area = lasting) {
  try {
    return area().getItem(key) || '';
  } catch {
    return memory.get(key) || '';
  }
}

export function keep(key, value, area = lasting) {
  memory.set(key, value);
  try {
    if (value) area().setItem(key, value);
    else area().removeItem(key);
  } catch {
    /* kept in memory only */
  }
}
