/**
 * A tool result when a human edited the arguments before approving: the model is told that the
 * tool ran with the approved arguments, which ones changed, and both argument sets, so that what
 * it reasons about next is what actually ran. What the agent-framework adapters return around the
 * function's own result.
 *
 * @module
 */
import type { Action } from './action.js';
import { canonicalJson, type JsonObject } from './canonical.js';
import type { Control } from './control/control.js';
import type { ApprovalEdit } from './control/edit.js';

/** The result of a tool call that ran with arguments a human edited when approving. */
export interface EditedToolResult<T = unknown> {
  readonly edited: true;
  /** One sentence: who edited, which arguments changed, and that the tool ran with the approved ones. */
  readonly message: string;
  /** The arguments the tool ran with. */
  readonly approved_arguments: JsonObject;
  /** The arguments the agent proposed. */
  readonly proposed_arguments: JsonObject;
  /** Who edited and approved. */
  readonly editor: string;
  /** The tool's own result. */
  readonly result: T;
}

/** The argument names whose values differ between `a` and `b` (added, removed or changed), sorted. */
function changedKeys(a: JsonObject, b: JsonObject): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  const own = (o: JsonObject, k: string) => Object.prototype.hasOwnProperty.call(o, k);
  return [...keys].filter((k) => own(a, k) !== own(b, k) || canonicalJson(a[k]) !== canonicalJson(b[k])).sort();
}

/** The {@link EditedToolResult} of `result`, for a call that ran under `edit`. */
export function editedToolResult<T>(edit: ApprovalEdit, result: T): EditedToolResult<T> {
  const changed = changedKeys(edit.proposedArguments, edit.approvedArguments);
  return {
    edited: true,
    message:
      `${edit.editor} edited the arguments before approving (changed: ${changed.map((k) => JSON.stringify(k)).join(', ')}); ` +
      'the tool ran once, with approved_arguments, not the arguments proposed.',
    approved_arguments: edit.approvedArguments,
    proposed_arguments: edit.proposedArguments,
    editor: edit.editor,
    result,
  };
}

/** Whether `value` is an {@link EditedToolResult}. */
export function isEditedToolResult(value: unknown): value is EditedToolResult {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { edited?: unknown }).edited === true &&
    typeof (value as { message?: unknown }).message === 'string'
  );
}

/**
 * The edit a human answered a request for `action`'s hash with, whose grant is still unused, or
 * null: present `edit.proposed` with `action` and the control path runs the edited action once
 * (`Control.grantApproval` with `edit`). How an adapter whose framework re-runs the proposed
 * call (a resumed graph node, a resumed run) finds an edit made by any surface. Reads only.
 */
export async function unusedEditFor(control: Control, action: Action): Promise<ApprovalEdit | null> {
  return control.unusedEdit(action);
}
