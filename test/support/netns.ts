/**
 * Two "hosts" on one machine, for the fault harness (issue 33): each a Linux network namespace of
 * its own with its own loopback, linked to the root namespace (where the database server runs:
 * the third host) by a veth pair. A client process started with {@link Hosts.prefix} lives in
 * that namespace and reaches the server only across its link, through a forwarder listening on
 * the root end of the link.
 *
 * {@link Hosts.cut} partitions one host mid-flight: its link goes down and every connection it
 * had is closed on the server's side (the backend sees the client gone and rolls back whatever
 * it had not committed); when the link comes back, the client's retransmissions meet a reset.
 * A COMMIT the forwarder had passed on landed and its reply is lost; one still in the client's
 * send buffer never reached the server. The other host is untouched.
 *
 * Needs root and `ip` (iproute2). {@link netnsUnavailable} says why not, where they are missing.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';

/** Why two hosts cannot be made here, or null when they can. */
export function netnsUnavailable(): string | null {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'network namespaces need root (uid is not 0)';
  const ip = spawnSync('ip', ['-V'], { encoding: 'utf8' });
  if (ip.error || ip.status !== 0) return 'the ip command (iproute2) is not installed';
  const name = `ctrlprobe${process.pid}`;
  const add = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  if (add.status !== 0) return `ip netns add failed: ${(add.stderr || '').trim()}`;
  spawnSync('ip', ['netns', 'del', name]);
  return null;
}

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** One host: its namespace, the address the server answers it on, and its forwarder. */
export interface Host {
  readonly name: string;
  readonly namespace: string;
  /** `url` (the server's, on 127.0.0.1) as this host reaches it: the root end of its link. */
  route(url: string): string;
  /** Connections the forwarder holds for this host now. */
  readonly open: number;
}

export interface Hosts {
  readonly hosts: readonly Host[];
  /** The command prefix that starts a process inside `host`'s namespace. */
  prefix(host: Host): string[];
  /** Partitions `host` for `ms`: link down, its connections closed server-side, link up again. */
  cut(host: Host, ms: number): Promise<void>;
  /** Removes the namespaces, links and forwarders. */
  close(): Promise<void>;
}

let made = 0;

/**
 * Makes `count` hosts linked to this namespace, each with a forwarder to `target` (the database
 * server on this namespace's loopback). Subnets 10.231.<n>.0/30, unique per call in this process.
 */
export async function makeHosts(count: number, target: { host: string; port: number }): Promise<Hosts> {
  const tag = `${process.pid % 100000}`;
  const hosts: Host[] = [];
  const servers: Server[] = [];
  const namespaces: string[] = [];
  const sockets = new Map<string, Set<Socket>>();
  const links = new Map<string, string>();
  try {
    for (let i = 0; i < count; i++) {
      const n = (made++ % 200) + 20;
      const namespace = `ctrl${tag}h${i}m${n}`;
      const outer = `c${tag}o${n}`.slice(0, 15);
      const inner = `c${tag}i${n}`.slice(0, 15);
      const rootAddress = `10.231.${n}.1`;
      const hostAddress = `10.231.${n}.2`;
      ip('netns', 'add', namespace);
      namespaces.push(namespace);
      ip('link', 'add', outer, 'type', 'veth', 'peer', 'name', inner);
      ip('link', 'set', inner, 'netns', namespace);
      ip('addr', 'add', `${rootAddress}/30`, 'dev', outer);
      ip('link', 'set', outer, 'up');
      ip('netns', 'exec', namespace, 'ip', 'addr', 'add', `${hostAddress}/30`, 'dev', inner);
      ip('netns', 'exec', namespace, 'ip', 'link', 'set', inner, 'up');
      ip('netns', 'exec', namespace, 'ip', 'link', 'set', 'lo', 'up');
      links.set(namespace, outer);

      const open = new Set<Socket>();
      sockets.set(namespace, open);
      const server = createServer((client) => {
        const upstream = connect(target.port, target.host);
        open.add(client);
        open.add(upstream);
        const drop = () => {
          client.destroy();
          upstream.destroy();
          open.delete(client);
          open.delete(upstream);
        };
        client.on('error', drop).on('close', drop);
        upstream.on('error', drop).on('close', drop);
        client.pipe(upstream);
        upstream.pipe(client);
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, rootAddress, () => resolve());
      });
      servers.push(server);
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      hosts.push({
        name: `host-${String.fromCharCode(97 + i)}`,
        namespace,
        route(url) {
          const u = new URL(url);
          u.hostname = rootAddress;
          u.port = String(port);
          return u.toString();
        },
        get open() {
          return open.size / 2;
        },
      });
    }
  } catch (err) {
    for (const s of servers) s.close();
    for (const ns of namespaces) spawnSync('ip', ['netns', 'del', ns]);
    throw err;
  }

  return {
    hosts,
    prefix: (host) => ['ip', 'netns', 'exec', host.namespace],
    async cut(host, ms) {
      const outer = links.get(host.namespace)!;
      ip('link', 'set', outer, 'down');
      // The server's side of every connection this host had goes away now; the host hears of it
      // only when its link is back (a reset), or never, if it is not sending.
      for (const s of sockets.get(host.namespace) ?? []) s.destroy();
      await new Promise((r) => setTimeout(r, ms));
      ip('link', 'set', outer, 'up');
    },
    async close() {
      for (const set of sockets.values()) for (const s of set) s.destroy();
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      for (const ns of namespaces) spawnSync('ip', ['netns', 'del', ns]);
    },
  };
}
