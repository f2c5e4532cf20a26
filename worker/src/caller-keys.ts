/**
 * Effect keys a caller supplies over HTTP: the kernel's intake scopes them (`caller/<action>/<key>`)
 * and refuses one an `effect:` template could also produce (400 at `$.effectKey`). Kept here under
 * its old path for the worker's readers; the code is the kernel's `caller-keys.ts`.
 *
 * @module
 */
export { CALLER_KEY_PREFIX, scopedCallerKey, templateCollision } from '@ctrlrun/kernel';
