import { TesseraError } from '@tessera/core';

/** MongoDB's limit on a database name (bytes; our names are checked in UTF-16 units, a stricter bound for ASCII). */
const MAX_DATABASE_NAME_LENGTH = 63;
/** MongoDB's limit on a full namespace `db.collection`. */
const MAX_NAMESPACE_LENGTH = 255;
const FORBIDDEN_IN_DATABASE_NAME = /[/\\. "$*<>:|?\0]/;

/**
 * Returns `db.coll` after checking both names by MongoDB's rules: a database name is 1–63
 * characters without `/ \ . space " $ * < > : | ?` or NUL; a collection name is non-empty,
 * has no `$` or NUL and does not start with `system.` (reserved). Throws `INVALID_NAMESPACE`
 * naming the part that is wrong.
 */
export function namespaceOf(db: string, coll: string): string {
  if (db.length === 0 || db.length > MAX_DATABASE_NAME_LENGTH || FORBIDDEN_IN_DATABASE_NAME.test(db)) {
    throw new TesseraError(
      'INVALID_NAMESPACE',
      `Invalid database name "${db}": it must be 1 to ${MAX_DATABASE_NAME_LENGTH} characters without / \\ . space " $ * < > : | ? or NUL.`,
      { details: { db } },
    );
  }
  if (coll.length === 0 || coll.includes('$') || coll.includes('\0')) {
    throw new TesseraError('INVALID_NAMESPACE', `Invalid collection name "${coll}": it must be non-empty and contain no $ or NUL.`, {
      details: { db, collection: coll },
    });
  }
  if (coll.startsWith('system.')) {
    throw new TesseraError('INVALID_NAMESPACE', `Invalid collection name "${coll}": names starting with "system." are reserved.`, {
      details: { db, collection: coll },
    });
  }
  const ns = `${db}.${coll}`;
  if (ns.length > MAX_NAMESPACE_LENGTH) {
    throw new TesseraError('INVALID_NAMESPACE', `Invalid namespace "${ns}": it is longer than ${MAX_NAMESPACE_LENGTH} characters.`, {
      details: { db, collection: coll },
    });
  }
  return ns;
}

/** Checks a full namespace `db.collection` given as one string (`where` names it in the message); throws as `namespaceOf`. */
export function parseNamespace(ns: string, where: string): string {
  const dot = ns.indexOf('.');
  if (dot <= 0)
    throw new TesseraError('INVALID_NAMESPACE', `Invalid namespace "${ns}" in ${where}: it must be db.collection.`, { details: { ns } });
  return namespaceOf(ns.slice(0, dot), ns.slice(dot + 1));
}

/** The database part of a namespace. */
export function databaseOf(ns: string): string {
  return ns.slice(0, ns.indexOf('.'));
}
