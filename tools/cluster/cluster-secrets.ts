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

/**
 * The root user's API key: `env`'s TESSERA_ROOT_KEY, else the one in `root.key`, made on first
 * start (readable by the owner only); `created` says it was made now, so it is printed this once.
 * The config servers keep the root user's key in step with it.
 */
export async function loadRootKey(root: string, env: Record<string, string>): Promise<{ key: string; created: boolean }> {
  if (env.TESSERA_ROOT_KEY !== undefined) return { key: env.TESSERA_ROOT_KEY, created: false };
  const file = join(root, 'root.key');
  if (existsSync(file)) return { key: readFileSync(file, 'utf8').trim(), created: false };
  const key = `tsk_root_${randomBytes(32).toString('base64url')}`;
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return { key, created: true };
}
