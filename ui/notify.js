// "Notify me of new requests": a browser notification per new request,
// opted into with the checkbox at the top and remembered in this browser.

import { $ } from './dom.js';
import { argumentsLine, commandLine } from './format.js';
import { keep, recall } from './storage.js';

const NOTIFY_KEY = 'skilld.notify';

const canNotify = () => 'Notification' in window;

/** Announces request `a`, if asked to; a click on it focuses the page and runs `reveal`. */
export function notify(a, reveal) {
  if (!$('#notify').checked || !canNotify() || Notification.permission !== 'granted') return;
  try {
    const note = new Notification(`Approval requested: ${a.skill} / ${a.tool}`, {
      body: `${commandLine(a.argv).slice(0, 200)}\n${argumentsLine(a.arguments).slice(0, 200)}\nby ${a.requested_by || 'anonymous'}`,
      tag: `skilld-${a.id}`,
    });
    note.addEventListener('click', () => {
      window.focus();
      reveal();
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

/** The checkbox as the page opens: on if chosen before and still allowed. */
export function showNotifyChoice() {
  $('#notify').checked = recall(NOTIFY_KEY) === '1' && canNotify() && Notification.permission === 'granted';
}

export function wireNotify() {
  $('#notify').addEventListener('change', onNotifyChange);
}
