import { type ClusterTimestamp, TesseraError, makeClusterTimestamp } from '@tessera/core';
import type { SignedClusterTime } from '@tessera/platform';

/**
 * The public API's forms of ClusterTime, in MongoDB's canonical Extended JSON: a time is
 * `{ $timestamp: { t, i } }`, a signed one
 * `{ clusterTime: { $timestamp }, signature: { hash: { $binary: { base64, subType: '00' } }, keyId: { $numberLong } } }`.
 */
export function timestampToWire(time: ClusterTimestamp): { $timestamp: { t: number; i: number } } {
  return { $timestamp: { t: time.t, i: time.i } };
}

export function clusterTimeToWire(signed: SignedClusterTime) {
  return {
    clusterTime: timestampToWire(signed.clusterTime),
    signature: {
      hash: { $binary: { base64: signed.signature.hash.toString('base64'), subType: '00' } },
      keyId: { $numberLong: signed.signature.keyId },
    },
  };
}

/** A client's `$clusterTime`; throws `BAD_VALUE` naming what is malformed. The relaxed forms (a plain number keyId) are accepted too. */
export function clusterTimeFromWire(value: unknown): SignedClusterTime {
  const bad = (what: string) => new TesseraError('BAD_VALUE', `$clusterTime: ${what}`, { details: { field: '$clusterTime' } });
  if (!isObject(value)) throw bad('must be an object { clusterTime, signature }');
  const time = isObject(value.clusterTime) && isObject(value.clusterTime.$timestamp) ? value.clusterTime.$timestamp : undefined;
  if (time === undefined || typeof time.t !== 'number' || typeof time.i !== 'number') {
    throw bad('clusterTime must be { $timestamp: { t, i } }');
  }
  let clusterTime: ClusterTimestamp;
  try {
    clusterTime = makeClusterTimestamp(time.t, time.i);
  } catch {
    throw bad('clusterTime needs integer parts in 0..2^32-1');
  }
  const signature = value.signature;
  if (!isObject(signature)) throw bad('signature must be { hash, keyId }');
  const hash = isObject(signature.hash) && isObject(signature.hash.$binary) ? signature.hash.$binary.base64 : undefined;
  if (typeof hash !== 'string') throw bad('signature.hash must be { $binary: { base64, subType } }');
  const keyId = isObject(signature.keyId) ? signature.keyId.$numberLong : signature.keyId;
  const keyIdText = typeof keyId === 'number' && Number.isSafeInteger(keyId) ? String(keyId) : keyId;
  if (typeof keyIdText !== 'string' || !/^\d{1,19}$/.test(keyIdText)) throw bad('signature.keyId must be an int64');
  return { clusterTime, signature: { hash: Buffer.from(hash, 'base64'), keyId: keyIdText } };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
