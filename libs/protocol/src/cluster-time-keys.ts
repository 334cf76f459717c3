import { z } from 'zod';

/**
 * An HMAC key that signs the ClusterTime gossiped to clients (MongoDB's admin.system.keys
 * document), as the config server hands it to the cluster's nodes over the internal API. The
 * secret crosses only internal, cluster-key-signed messages; the control plane shows ids and
 * expiry alone.
 */
export const clusterTimeKeySchema = z.strictObject({
  /** An int64, as a decimal string. */
  keyId: z.string().regex(/^\d{1,19}$/),
  /** The secret, base64. */
  key: z.base64(),
  /** When the key stops signing, ISO 8601; it still verifies for one rotation interval after. */
  expiresAt: z.iso.datetime(),
});
export type ClusterTimeKey = z.infer<typeof clusterTimeKeySchema>;

export const clusterTimeKeysSchema = z.strictObject({
  keys: z.array(clusterTimeKeySchema),
  /** KeysRotationIntervalSec: each key signs for this long, and verifies for as long again. */
  rotationIntervalSecs: z.number().int().positive(),
});
export type ClusterTimeKeys = z.infer<typeof clusterTimeKeysSchema>;
