/**
 * Database versions (reference: "Database versioning"): (uuid, lastMod). The uuid names one
 * incarnation of a database; lastMod increases when its primary shard changes.
 */
import { TesseraError } from '../errors.js';
import type { VersionComparison } from './chunk-version.js';

/** The placement version of a database's unsharded collections. */
export interface DatabaseVersion {
  readonly uuid: string;
  readonly lastMod: number;
}

/** Convention: the lastMod of a newly created database. */
export const NEW_DATABASE_LAST_MOD = 1;

/** Convention: the lastMod of the `config` and `admin` databases, which never move. */
export const FIXED_DATABASE_LAST_MOD = 0;

/** Returns the version of a newly created database: `{uuid, lastMod: 1}`. Throws `BAD_VALUE` on an empty uuid. */
export function newDatabaseVersion(uuid: string): DatabaseVersion {
  return makeDatabaseVersion(uuid, NEW_DATABASE_LAST_MOD);
}

/** Returns the version of the `config` or `admin` database: `{uuid, lastMod: 0}`. Throws `BAD_VALUE` on an empty uuid. */
export function fixedDatabaseVersion(uuid: string): DatabaseVersion {
  return makeDatabaseVersion(uuid, FIXED_DATABASE_LAST_MOD);
}

/** Builds a database version. Throws `BAD_VALUE` on an empty uuid or a lastMod that is not a non-negative integer. */
export function makeDatabaseVersion(uuid: string, lastMod: number): DatabaseVersion {
  if (uuid.length === 0 || !Number.isSafeInteger(lastMod) || lastMod < 0) {
    throw new TesseraError('BAD_VALUE', `Invalid database version {uuid: "${uuid}", lastMod: ${lastMod}}.`, { details: { uuid, lastMod } });
  }
  return { uuid, lastMod };
}

/**
 * Tells how `a` relates to `b`: same/older/newer by lastMod for one uuid, or
 * `'differentGeneration'` when the uuids differ (the database was dropped and recreated). Throws nothing.
 */
export function compareDatabaseVersions(a: DatabaseVersion, b: DatabaseVersion): VersionComparison {
  if (a.uuid !== b.uuid) return 'differentGeneration';
  return a.lastMod === b.lastMod ? 'same' : a.lastMod < b.lastMod ? 'older' : 'newer';
}

/** Table row "Changing the primary shard for a DB": returns `{uuid, lastMod + 1}`. Throws nothing. */
export function bumpDatabaseVersionOnMovePrimary(version: DatabaseVersion): DatabaseVersion {
  return { uuid: version.uuid, lastMod: version.lastMod + 1 };
}

/** Table row "Dropping a database": the dropped database has no version, so this returns `undefined`. Throws nothing. */
export function databaseVersionAfterDrop(_version: DatabaseVersion): undefined {
  return undefined;
}

/** Returns the display form `"uuid|lastMod"`. Throws nothing. */
export function databaseVersionToString(version: DatabaseVersion): string {
  return `${version.uuid}|${version.lastMod}`;
}

/**
 * Checks the database version a request carries against the one the shard holds. Throws
 * `STALE_DB_VERSION` (retryable) with both versions in `details` unless they are the same.
 */
export function checkDatabaseVersion(database: string, received: DatabaseVersion, wanted: DatabaseVersion): void {
  const relation = compareDatabaseVersions(received, wanted);
  if (relation === 'same') return;
  throw new TesseraError(
    'STALE_DB_VERSION',
    `Database version mismatch for ${database}: request has ${databaseVersionToString(received)}, shard has ${databaseVersionToString(wanted)} (${relation}).`,
    { details: { database, received, wanted, relation } },
  );
}
