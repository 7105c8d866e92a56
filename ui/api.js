// The API client: the one credential, the calls, and the sentence a person
// reads when one fails.

import { keep, recall, tabOnly } from './storage.js';

// The modules are served at <base>/ui/*.js; the API lives at <base>/, so a
// skilld behind a path prefix still works.
export const BASE = new URL('../', import.meta.url);

const TOKEN_KEY = 'skilld.token';
const SECRET_KEY = 'skilld.secret';

// A typed token is kept in localStorage until forgotten; the start link's
// secret in this tab's sessionStorage (`storage.js`).
export const getToken = () => recall(TOKEN_KEY);
export const getSecret = () => recall(SECRET_KEY, tabOnly);
export const setToken = (token) => keep(TOKEN_KEY, token);
export const setSecret = (secret) => keep(SECRET_KEY, secret, tabOnly);

// An Authorization header carries visible ASCII only; anything else
// would fail every call with a confusing network error.
export const VISIBLE_ASCII = /^[\x21-\x7e]+$/;

class ApiError extends Error {
  constructor(status, problem, message) {
    super(message);
    this.status = status;
    this.problem = problem;
  }
}

export const refused = (err) => err.status === 401 || err.status === 403;

/** The sentence a person reads for a failed call. */
export function describeProblem(status, problem) {
  const detail = (problem && (problem.detail || problem.title)) || '';
  const suffix = detail ? ` Server says: ${detail}` : '';
  if (status === 401 && problem && problem.code === 'local_secret_required') {
    // A server without tokens: the person who started it holds the link.
    if (getSecret()) {
      return 'Not signed in (401): this server did not take the local secret of the link this ' +
        'tab was opened with (a wrong link, or a server started since with a new secret). Open ' +
        'the link `skilld serve` printed when it started ("approve at http://…/ui#secret=…", ' +
        'also in its log).';
    }
    return 'Not signed in (401): this server has no tokens, so approvals are for the person who ' +
      'started it. Open this page through the link `skilld serve` printed when it started ' +
      '("approve at http://…/ui#secret=…", also in its log); this tab then keeps the secret ' +
      'until it is closed. Or enter the secret from the file local-secret in the server\'s data ' +
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

/** The one credential: the start link's secret, else the typed token. */
export function authHeaders(accept) {
  const headers = { Accept: accept };
  const token = getSecret() || getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  return headers;
}

export async function api(method, path, body) {
  const headers = authHeaders('application/json');
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(new URL(path, BASE), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      // No cookie is a credential here: none is sent, none taken.
      credentials: 'omit',
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
