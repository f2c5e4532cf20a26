/**
 * What every route group is handed: the app's Hono environment, the control path, the body limit,
 * and the gates that say who may call a route. A gate resolves the credential once per request and
 * checks it against the roles the route takes: no credential is 401; the wrong role is 403; an
 * agent credential whose principal the kernel would refuse is 401 (the credential's fault, not
 * the body's).
 *
 * @module
 */
import type { Hono, MiddlewareHandler } from 'hono';
import { createPrincipal, IdentityError, InvalidArgument, type Control } from '@ctrlrun/kernel';
import type { Authenticator, Identity } from '../auth.js';
import { errorResponse } from '../http.js';

/** The app's Hono environment: every gated route finds the caller's identity under `identity`. */
export type AppEnv = { Variables: { identity: Identity } };

/** A route's gate: the roles it takes and what they may do there, as a 403 names it. */
export type Gate = (roles: readonly Identity['role'][], what: string) => MiddlewareHandler<AppEnv>;

/** The gates every route group uses. */
export interface Gates {
  /** Any of `roles` may `what`. */
  readonly as: Gate;
  /** An agent credential (propose actions). */
  readonly agent: MiddlewareHandler<AppEnv>;
  /** An operator credential, for `what` (403 for an agent). */
  readonly operator: (what: string) => MiddlewareHandler<AppEnv>;
}

/** What `mountXxx(ctx)` gets: the app to add its routes to, and what they share. */
export interface RouteContext {
  readonly app: Hono<AppEnv>;
  readonly control: Control;
  readonly gates: Gates;
  /** Largest accepted request body, in bytes. */
  readonly bodyLimit: number;
}

/** The gates over `auth`. */
export function roleGates(auth: Authenticator): Gates {
  const as: Gate = (roles, what) => async (c, next) => {
    let identity: Identity | null;
    try {
      identity = await auth(c.req.raw);
    } catch (err) {
      if (err instanceof IdentityError) return errorResponse(401, err.code, err.message, {}, { 'www-authenticate': 'Bearer error="invalid_token"' });
      throw err;
    }
    if (identity === null)
      return errorResponse(401, 'ERR_IDENTITY', 'a bearer credential is required (Authorization: Bearer <token>)', {}, { 'www-authenticate': 'Bearer' });
    if (!roles.includes(identity.role)) return errorResponse(403, 'ERR_FORBIDDEN', `an ${identity.role} credential cannot ${what}`);
    if (identity.role === 'agent') {
      // A principal the kernel would refuse is the credential's fault, not the body's.
      try {
        createPrincipal(identity.principal);
      } catch (err) {
        if (!(err instanceof InvalidArgument)) throw err;
        return errorResponse(
          401,
          'ERR_IDENTITY',
          `the credential's principal is not valid: ${err.message}`,
          {},
          { 'www-authenticate': 'Bearer error="invalid_token"' },
        );
      }
    }
    c.set('identity', identity);
    await next();
    return undefined;
  };
  return { as, agent: as(['agent'], 'propose actions'), operator: (what) => as(['operator'], what) };
}
