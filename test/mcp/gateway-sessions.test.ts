// Which upstream notifications the gateway sends to which agent sessions: with one principal for
// every session, all of them; with a principal per request (an identity provider), only list
// changes, so one agent never hears another's log lines or resource updates.
import { describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import type { Notification } from '@modelcontextprotocol/sdk/types.js';
import { Control, HeaderIdentityProvider, loadPolicy } from '@ctrlrun/kernel';
import { Gateway } from '@ctrlrun/mcp';
import { createSqlJsStore } from '@ctrlrun/store-sqljs';

/** A stand-in for the upstream Client: what the Gateway reads and sets on it. */
function fakeUpstream() {
  return {
    fallbackNotificationHandler: undefined as undefined | ((n: Notification) => Promise<void>),
    setNotificationHandler() {},
    request: async () => ({ content: [] }),
    transport: {},
    getServerVersion: () => ({ name: 'up', version: '1' }),
    getServerCapabilities: () => ({ logging: {}, tools: { listChanged: true }, resources: { subscribe: true, listChanged: true } }),
    getInstructions: () => undefined,
  };
}

async function session(gateway: Gateway): Promise<string[]> {
  const heard: string[] = [];
  const [a, b] = InMemoryTransport.createLinkedPair();
  await gateway.createServer().connect(a);
  const client = new Client({ name: 'agent', version: '1' });
  client.fallbackNotificationHandler = async (n) => void heard.push(`${n.method} ${JSON.stringify(n.params ?? {})}`);
  await client.connect(b);
  return heard;
}

describe('gateway: upstream notifications and sessions', () => {
  for (const perRequest of [false, true]) {
    it(
      perRequest ? 'with a principal per request, only list changes reach every session' : 'with one principal, every notification reaches every session',
      async () => {
        const store = await createSqlJsStore();
        try {
          const identity = perRequest ? new HeaderIdentityProvider({ agentHeader: 'X-Agent', userHeader: null }, { logger: { warn: () => {} } }) : null;
          const control = new Control({ policy: loadPolicy('schema: ctrlrun.policy/v2\nactions: {}\n'), store, identity, logger: { warn: () => {} } });
          const upstream = fakeUpstream();
          const gateway = new Gateway({ control, upstream: upstream as never, alias: 'pay', principal: perRequest ? null : { agent: 'agent-1' } });
          const [one, two] = [await session(gateway), await session(gateway)];
          await upstream.fallbackNotificationHandler!({ method: 'notifications/message', params: { level: 'info', data: 'refunded p1 for customer ana' } });
          await upstream.fallbackNotificationHandler!({ method: 'notifications/resources/updated', params: { uri: 'memo://ana' } });
          await upstream.fallbackNotificationHandler!({ method: 'notifications/tools/list_changed' });
          for (let i = 0; i < 100 && (one.length === 0 || two.length === 0); i++) await new Promise((r) => setTimeout(r, 10));
          await new Promise((r) => setTimeout(r, 50));
          const expected = perRequest
            ? ['notifications/tools/list_changed {}']
            : [
                'notifications/message {"level":"info","data":"refunded p1 for customer ana"}',
                'notifications/resources/updated {"uri":"memo://ana"}',
                'notifications/tools/list_changed {}',
              ];
          expect(one).toEqual(expected);
          expect(two).toEqual(expected);
        } finally {
          await store.close();
        }
      },
      60_000,
    );
  }
});
