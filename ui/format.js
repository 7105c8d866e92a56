// How values read on the page: commands and arguments with nothing hidden
// in them, times, sizes, badges. Each returns text or elements built by
// `el`, never markup.

import { el } from './dom.js';

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
export const safeJson = (value) =>
  JSON.stringify(value, null, 2).replace(new RegExp(HIDDEN.source, 'g'), (ch) =>
    ch === '\n' ? ch : `\\u${ch.codePointAt(0).toString(16).padStart(4, '0')}`);

export const commandLine = (argv) => (Array.isArray(argv) ? argv.map((w) => shellQuote(String(w))).join(' ') : '');

/**
 * A value as JSON with object keys sorted at every depth: two calls with
 * the same arguments read the same whatever order their keys came in.
 */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** The arguments on one line, hiding characters escaped as in the details. */
export const argumentsLine = (value) =>
  canonicalJson(value ?? {}).replace(new RegExp(HIDDEN.source, 'g'), (ch) => `\\u${ch.codePointAt(0).toString(16).padStart(4, '0')}`);

/**
 * Characters that hide or disguise the text of a file under review
 * (controls, bidi overrides and isolates, zero-width characters, line
 * and paragraph separators). Tabs and newlines are a file's own.
 */
const DISGUISE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;

/** Text as nodes, each hiding character shown as a marked `\uXXXX`: the reviewer reads what the file holds. */
export function revealed(value) {
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

// ---- times, sizes, names ---------------------------------------------------

export function time(iso) {
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

export function fromNow(iso) {
  const ms = new Date(iso).getTime() - Date.now();
  if (Number.isNaN(ms)) return '';
  const minutes = Math.round(Math.abs(ms) / 60000);
  const span = minutes < 1 ? 'less than a minute' : minutes < 120 ? `${minutes} min` : `${Math.round(minutes / 60)} h`;
  return ms >= 0 ? `in ${span}` : `${span} ago`;
}

/** How long ago, in the fewest characters a compact card can spare. */
export function age(iso) {
  const minutes = Math.floor((Date.now() - new Date(iso).getTime()) / 60000);
  if (Number.isNaN(minutes)) return '';
  if (minutes < 1) return 'just now';
  if (minutes < 120) return `${minutes} min ago`;
  return minutes < 2880 ? `${Math.round(minutes / 60)} h ago` : `${Math.round(minutes / 1440)} d ago`;
}

export function duration(ms) {
  if (typeof ms !== 'number') return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function size(bytes) {
  if (typeof bytes !== 'number') return '';
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(bytes < 10240 ? 1 : 0)} KiB`;
}

export function badge(kind, value) {
  return el('span', { class: `badge ${kind}-${value}`, text: String(value).replace(/_/g, ' ') });
}

export const who = (name) => name || el('span', { class: 'muted', text: 'anonymous' });

export const hashPrefix = (hash) => String(hash || '').slice(0, 12);
