/**
 * An anchoring account's Worker: every request goes to one AnchorLedger Durable Object (the
 * append-only anchors of another account's store), which answers the kernel's signed protocol.
 */
import { AnchorLedger } from '@ctrlrun/store-do';

export { AnchorLedger };

interface Env {
  ANCHORS: { idFromName(name: string): unknown; get(id: unknown): { fetch(request: Request): Promise<Response> } };
}

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    return env.ANCHORS.get(env.ANCHORS.idFromName('anchors')).fetch(request);
  },
};
