/**
 * The app as an entry point serves it from {@link WorkerSettings}: the configured policy and
 * executors (or the built-in try-it policy with its fake remote), the playground on its own
 * store when demo mode is on.
 *
 * @module
 */
import { Control, type Clock, type IdSource, type StateStore } from '@ctrlrun/kernel';
import { createTryIt } from '@ctrlrun/kernel/try-it';
import { createApp, type App } from './app.js';
import type { WorkerSettings } from './settings.js';

/** Builds the app for `settings` over `store` (and `tryItStore` for the playground, when on). */
export function createConfiguredApp(
  settings: WorkerSettings,
  options: { store: StateStore; tryItStore?: StateStore | null; clock?: Clock; ids?: IdSource },
): { app: App; control: Control } {
  const extra = { ...(options.clock ? { clock: options.clock } : {}), ...(options.ids ? { ids: options.ids } : {}) };
  const control = new Control({
    policy: settings.policy,
    store: options.store,
    ...(settings.environment !== null ? { environment: settings.environment } : {}),
    ...(settings.approvers ? { approvers: settings.approvers } : {}),
    ...extra,
  });
  const tryIt = settings.demo && options.tryItStore ? createTryIt({ store: options.tryItStore, ...extra }) : null;
  const app = createApp({
    control,
    executors: settings.executors,
    auth: settings.auth,
    tryIt,
    policyText: settings.policyText,
    policySource: settings.policySource,
    inbox: { sessionSecret: settings.sessionSecret },
    anchor: settings.anchor,
    mcp: settings.mcp,
    ...(settings.cors ? { cors: settings.cors } : {}),
  });
  return { app, control };
}
