import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Bearer tokens of the config servers' GraphQL control plane and socket.io streams. */
export interface ControlPlaneTokens {
  admin: string;
  viewer: string;
}

/** The cluster key in `root/cluster.key`, made on first start (readable by the owner only). */
export async function loadClusterKey(root: string): Promise<string> {
  const file = join(root, 'cluster.key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const key = randomBytes(32).toString('hex');
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return key;
}

/** The tokens `env` sets, else those in `control-plane.tokens` (made on first start, readable by the owner only). */
export async function loadControlPlaneTokens(root: string, env: Record<string, string>): Promise<ControlPlaneTokens> {
  const file = join(root, 'control-plane.tokens');
  const saved: ControlPlaneTokens = existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as ControlPlaneTokens)
    : { admin: `admin-${randomBytes(24).toString('hex')}`, viewer: `viewer-${randomBytes(24).toString('hex')}` };
  if (!existsSync(file)) await writeFile(file, `${JSON.stringify(saved)}\n`, { mode: 0o600 });
  return { admin: env.TESSERA_ADMIN_TOKEN ?? saved.admin, viewer: env.TESSERA_VIEWER_TOKEN ?? saved.viewer };
}
