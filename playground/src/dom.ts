/**
 * The DOM the page and the `<ctrlrun-try-it>` element share: one element builder, and the output
 * entry for a {@link LogItem} (its verdict, evidence lines, the JSON `step()` returned, and the
 * `data-*` attributes tests read).
 *
 * @module
 */
import type { LogItem } from './kept.js';
import { renderApprove, renderRefund, renderRefused, renderResolve, type Entry } from './render.js';

/** `document.createElement(tag)` with attributes and children (text is set as text, never parsed). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

/** What an output entry says. */
export function entryFor(item: LogItem): Entry {
  switch (item.kind) {
    case 'refund':
      return renderRefund(item.request, item.result);
    case 'approve':
      return renderApprove(item.request, item.result);
    case 'resolve':
      return renderResolve(item.request, item.result);
    case 'refused':
      return renderRefused(item.asked, item.error);
    case 'note':
      return { tone: 'ok', asked: 'the page', title: item.text, lines: [] };
  }
}

/** The `<li>` of one output entry. */
export function entryElement(item: LogItem): HTMLLIElement {
  const entry = entryFor(item);
  const li = h('li', { class: `entry tone-${entry.tone}` });
  if (item.kind === 'refund') {
    li.dataset['outcome'] = item.result.outcome;
    li.dataset['remoteCalls'] = String(item.result.remote_calls);
    if (item.result.error) li.dataset['error'] = item.result.error;
    if (item.result.reason) li.dataset['reason'] = item.result.reason;
    const receipt = item.result.receipt as Record<string, unknown> | undefined;
    if (receipt) {
      li.dataset['decision'] = String(receipt['decision']);
      li.dataset['result'] = String(receipt['result']);
      li.dataset['approvalId'] = String(receipt['approval_id']);
    }
    if (item.result.request_id) li.dataset['requestId'] = item.result.request_id;
  } else if (item.kind === 'approve') {
    li.dataset['outcome'] = 'approved';
    li.dataset['approvalId'] = item.result.approval_id;
    li.dataset['actionHash'] = item.result.action_hash;
  } else if (item.kind === 'resolve') {
    li.dataset['outcome'] = 'resolved';
    li.dataset['state'] = item.result.state;
  } else {
    li.dataset['outcome'] = item.kind;
  }
  li.append(h('p', { class: 'asked' }, `› ${entry.asked}`), h('p', { class: 'title' }, entry.title));
  if (entry.lines.length) li.append(h('pre', { class: 'lines' }, entry.lines.join('\n')));
  if (item.kind === 'refund' || item.kind === 'approve' || item.kind === 'resolve') {
    li.append(h('details', {}, h('summary', {}, 'the JSON step() returned'), h('pre', { class: 'json' }, JSON.stringify(item.result, null, 2))));
  }
  return li;
}
