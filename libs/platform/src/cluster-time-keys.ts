import { createHmac, timingSafeEqual } from 'node:crypto';
import { type ClusterTimestamp, TesseraError } from '@tessera/core';
import type { ClusterTimeKeys } from '@tessera/protocol';

/** A ClusterTime with its proof (MongoDB's SignedComponentFormat): the HMAC of the time under key `keyId`. */
export interface SignedClusterTime {
  clusterTime: ClusterTimestamp;
  signature: { hash: Buffer; keyId: string };
}

/** Fetches again at most this often when a keyId is unknown or no key signs: a forged keyId cannot flood the config server. */
const MIN_REFETCH_MS = 1_000;

/** MongoDB's signature of a Timestamp: HMAC-SHA1 of its 8 bytes, seconds then increment, big-endian. */
export function clusterTimeHash(key: Buffer, time: ClusterTimestamp): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeUInt32BE(time.t, 0);
  bytes.writeUInt32BE(time.i, 4);
  return createHmac('sha1', key).update(bytes).digest();
}

interface CachedKey {
  keyId: string;
  key: Buffer;
  expiresAt: number;
}

/**
 * A node's cache of the ClusterTime keys (MongoDB's KeysCollectionCache): fetched from the config
 * server at first use, again when no cached key signs any more, and when a ClusterTime names a
 * keyId it does not know. A key signs until it expires and verifies for one rotation interval
 * after, so a time signed just before a rotation verifies everywhere.
 */
export class ClusterTimeKeyCache {
  private keys: CachedKey[] = [];
  private rotationIntervalMs = 0;
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private fetching: Promise<void> | undefined;

  constructor(
    private readonly fetchKeys: () => Promise<ClusterTimeKeys>,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * `time` signed with the key that signs now, or undefined while this node has none (the keys
   * are being fetched): a reply goes out unsigned rather than waiting for the config server.
   */
  sign(time: ClusterTimestamp): SignedClusterTime | undefined {
    const now = this.now();
    const key = this.keys.find((k) => k.expiresAt > now);
    if (key === undefined || this.keys.at(-1) === key) void this.refetch().catch(() => undefined);
    return key === undefined ? undefined : { clusterTime: time, signature: { hash: clusterTimeHash(key.key, time), keyId: key.keyId } };
  }

  /**
   * Throws unless `signed` carries the HMAC of its time under a key that still verifies:
   * `NOT_FOUND` (MongoDB's KeyNotFound) for a keyId the config server does not know or past its
   * overlap, `TIME_PROOF_MISMATCH` for a hash that does not match.
   */
  async verify(signed: SignedClusterTime): Promise<void> {
    let key = this.verifying(signed.signature.keyId);
    if (key === undefined) {
      await this.refetch();
      key = this.verifying(signed.signature.keyId);
    }
    if (key === undefined) {
      throw new TesseraError(
        'NOT_FOUND',
        `No keys found for HMAC that is valid for the time: ${signed.clusterTime.t},${signed.clusterTime.i} with id: ${signed.signature.keyId}`,
        {
          details: { keyId: signed.signature.keyId },
        },
      );
    }
    const expected = clusterTimeHash(key.key, signed.clusterTime);
    if (signed.signature.hash.length !== expected.length || !timingSafeEqual(signed.signature.hash, expected)) {
      throw new TesseraError('TIME_PROOF_MISMATCH', 'Time proof mismatch: the $clusterTime signature does not match its time', {
        details: { keyId: signed.signature.keyId },
      });
    }
  }

  private verifying(keyId: string): CachedKey | undefined {
    const key = this.keys.find((k) => k.keyId === keyId);
    return key !== undefined && key.expiresAt + this.rotationIntervalMs > this.now() ? key : undefined;
  }

  /** Fetches the keys again, one fetch at a time and at most once per MIN_REFETCH_MS. */
  private refetch(): Promise<void> {
    if (this.fetching !== undefined) return this.fetching;
    if (this.now() - this.fetchedAt < MIN_REFETCH_MS) return Promise.resolve();
    this.fetchedAt = this.now();
    this.fetching = this.fetchKeys()
      .then((answer) => {
        this.rotationIntervalMs = answer.rotationIntervalSecs * 1000;
        this.keys = answer.keys
          .map((k) => ({ keyId: k.keyId, key: Buffer.from(k.key, 'base64'), expiresAt: Date.parse(k.expiresAt) }))
          .sort((a, b) => a.expiresAt - b.expiresAt);
      })
      .finally(() => (this.fetching = undefined));
    return this.fetching;
  }
}
