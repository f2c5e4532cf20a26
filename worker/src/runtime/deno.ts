/**
 * Deno entry on `Deno.serve` (`deno run -A --node-modules-dir=manual`, from the repository root
 * so `sql.js` and the database drivers resolve from `node_modules`). `PORT` (default 8787; 0
 * picks one) and `HOST` (default 127.0.0.1); configuration and stores as in `deno-app.ts`. For
 * `deno serve`, see `deno-serve.ts`.
 *
 * @module
 */
import { denoApp } from './deno-app.js';

declare const Deno: {
  env: { toObject(): Record<string, string> };
  serve(
    options: { port: number; hostname: string; onListen?: (addr: { hostname: string; port: number }) => void },
    handler: (request: Request) => Response | Promise<Response>,
  ): { finished: Promise<void> };
};

const env = Deno.env.toObject();
const { app, banner } = await denoApp();
Deno.serve(
  {
    port: Number(env['PORT'] ?? 8787),
    hostname: env['HOST'] || '127.0.0.1',
    onListen(addr) {
      console.log(banner(`http://${addr.hostname}:${addr.port}`));
    },
  },
  (request) => app.fetch(request),
);
