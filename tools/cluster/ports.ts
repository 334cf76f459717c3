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
  await new Promise<void>((resolvePort, reject) => {
    const server = createServer();
    server.once('error', () =>
      reject(new Error(`port ${port} for ${name} is already in use; stop whatever holds it or choose other ports`)),
    );
    server.listen(port, '127.0.0.1', () => server.close(() => resolvePort()));
  });
}

/** A port the OS says is free now (for tests that run beside other clusters). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}
