/**
 * `deno serve` entry: `deno serve -A --node-modules-dir=manual --port 8787 worker/dist/runtime/deno-serve.js`
 * (after `npx tsc -b`), with the configuration of `deno-app.ts` (`CTRLRUN_CONFIG_FILE` names a
 * config document; `DATABASE_URL=postgres://…` a PostgreSQL server, `pglite:DIR` a local file store).
 * `deno serve` picks the port and host (`--port`, `--host`); the banner prints once it listens.
 *
 * @module
 */
import { denoApp } from './deno-app.js';

const { app, banner } = await denoApp();

export default {
  fetch: (request: Request): Response | Promise<Response> => app.fetch(request),
  onListen(addr: { hostname: string; port: number }): void {
    console.log(banner(`http://${addr.hostname.includes(':') ? `[${addr.hostname}]` : addr.hostname}:${addr.port}`));
  },
};
