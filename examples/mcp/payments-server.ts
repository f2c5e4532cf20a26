// An MCP server with one consequential tool (refund) and one read (lookup_payment), over stdio,
// written with the MCP SDK as any server on npm is. It knows nothing about ctrlrun: the gateway
// in front of it decides which calls reach it. Run it behind `ctrlrun gateway` (see the README).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'payments', version: '1.0.0' });
server.registerTool(
  'refund',
  { description: 'Refund a payment (amount in minor units).', inputSchema: { payment_id: z.string(), amount: z.number().int() } },
  async ({ payment_id, amount }) => ({ content: [{ type: 'text', text: `refunded ${amount} on ${payment_id} (re_${payment_id})` }] }),
);
server.registerTool('lookup_payment', { description: 'Read a payment.', inputSchema: { payment_id: z.string() } }, async ({ payment_id }) => ({
  content: [{ type: 'text', text: `${payment_id}: 2000.00 EUR, captured` }],
}));
await server.connect(new StdioServerTransport());
