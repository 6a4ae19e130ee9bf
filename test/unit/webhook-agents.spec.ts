import http from 'node:http';
import { AddressInfo } from 'node:net';
import { WebhookAgents } from '../../src/events/webhook-request';

/**
 * Kept-alive connections to a webhook endpoint: reused while the delivery's
 * fresh resolution names the addresses they were pinned to; a resolution that
 * changed gets a connection of its own, never the old one.
 */
describe('WebhookAgents', () => {
  let server: http.Server;
  /** Each connection the receiver accepted: the address it was made to, and whether it is still open. */
  const connections: { to: string; open: boolean }[] = [];
  let url: URL;

  beforeAll(async () => {
    server = http.createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()));
    server.on('connection', (socket) => {
      const seen = { to: socket.localAddress!, open: true };
      connections.push(seen);
      socket.on('close', () => (seen.open = false));
    });
    // Every loopback address (127.0.0.1 and 127.0.0.2 alike) reaches it.
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    url = new URL(`http://hooks.example:${(server.address() as AddressInfo).port}/hooks`);
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  /** One POST through the agent WebhookAgents gives for `address` (its resolution), answered. */
  const post = (agents: WebhookAgents, address: string) =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(url, { method: 'POST', agent: agents.agent(url, [{ address, family: 4 }]) }, (res) => res.resume().on('end', resolve));
      req.on('error', reject);
      req.end('{}');
    });

  it('two deliveries to one endpoint share one connection; a changed resolution opens another and closes the old', async () => {
    const agents = new WebhookAgents();
    await post(agents, '127.0.0.1');
    await post(agents, '127.0.0.1');
    expect(connections).toEqual([{ to: '127.0.0.1', open: true }]);

    await post(agents, '127.0.0.2');
    // Past the accept and the close on the receiver's side.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(connections).toEqual([
      { to: '127.0.0.1', open: false },
      { to: '127.0.0.2', open: true },
    ]);

    // Back to the first address: not the old connection (closed), nor the second's.
    await post(agents, '127.0.0.1');
    expect(connections.map((c) => c.to)).toEqual(['127.0.0.1', '127.0.0.2', '127.0.0.1']);
  });
});
