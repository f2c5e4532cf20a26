/**
 * What the JSON routes share when they read a request: the 400 and 404 they answer with, the
 * object check, a bounded integer query parameter, the empty body of an answer, and page sizes.
 *
 * @module
 */
import type { Context } from 'hono';
import type { JsonObject } from '@ctrlrun/kernel';
import { HttpError, readJsonBody } from '../http.js';

/** A list's page size when `limit` is not given, and the largest one taken. */
export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1000;

/** 400 `ERR_INVALID_ARGUMENT` naming the JSON path (or `query.name`) at fault. */
export function badRequest(message: string, path: string): HttpError {
  return new HttpError(400, 'ERR_INVALID_ARGUMENT', message, { path });
}

/** 404 `ERR_NOT_FOUND`. */
export function notFound(message: string): HttpError {
  return new HttpError(404, 'ERR_NOT_FOUND', message);
}

/** A JSON object (not an array, not null). */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The integer query parameter `name`, from `min` to `max` (absent or empty: `fallback`). */
export function queryInteger(c: Context, name: string, fallback: number, min: number, max: number): number {
  const raw = c.req.query(name);
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d{1,15}$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw badRequest(`${name} must be an integer from ${min} to ${max}`, `query.${name}`);
  }
  return Number(raw);
}

/** Whether the request carries no body at all (no type, not chunked, no or a zero length). */
export function hasNoBody(request: Request): boolean {
  const length = request.headers.get('content-length');
  const chunked = request.headers.has('transfer-encoding');
  return !request.headers.has('content-type') && !chunked && (length === null || length.trim() === '0');
}

/** A request that takes no fields: an empty body, or `{}`. */
export async function readEmptyBody(request: Request, limit: number): Promise<void> {
  if (hasNoBody(request)) return;
  const body = await readJsonBody(request, limit);
  if (!isObject(body)) throw badRequest('the request body must be empty or {}', '$');
  const extra = Object.keys(body)[0];
  if (extra !== undefined) throw badRequest(`unknown field ${JSON.stringify(extra)}: this request takes no fields`, `$[${JSON.stringify(extra)}]`);
}
