import { createServer } from 'node:net';

/** The port of the `index`-th node of a kind: a base port plus the index, or the index-th of a list. */
export function portAt(spec: number | number[], index: number): number {
  if (typeof spec === 'number') return spec + index;
  const port = spec[index];
  if (port === undefined) throw new Error(`no port given for node ${index}`);
  return port;
}

/** Fails, naming the node, when `port` is taken. */
export async function assertPortFree(port: number, name: string): Promise<void> {
  if (!(await canListen(port))) throw new Error(`port ${port} for ${name} is already in use; stop whatever holds it or choose other ports`);
}

/** True when a listener on `port` at 127.0.0.1 can be opened now (it is closed again). */
function canListen(port: number): Promise<boolean> {
  return new Promise<boolean>((resolvePort) => {
    const server = createServer();
    server.once('error', () => resolvePort(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolvePort(true)));
  });
}

/** Where `freePort` picks: below Linux's default ephemeral range (32768-60999), above the well-known services. */
const PICK_FROM = 20_000;
const PICK_TO = 32_000;
/** Ports this process handed out, never handed out twice. */
const handedOut = new Set<number>();

/**
 * A port that is free now (for tests that run beside other clusters): a random one between
 * `PICK_FROM` and `PICK_TO` that can be listened on. Not an OS-assigned ephemeral one: every
 * outgoing connection (to Postgres, between nodes) also takes a port from that range, and one
 * could take it between this check and the node's listen.
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = PICK_FROM + Math.floor(Math.random() * (PICK_TO - PICK_FROM));
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
}
