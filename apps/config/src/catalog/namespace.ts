/** The database part of `db.collection`. */
export function databaseOf(ns: string): string {
  return ns.slice(0, ns.indexOf('.'));
}

/**
 * The distributed lock resource of a database. Database names are unique regardless of case,
 * so `Foo` and `foo` must serialise on one lock.
 */
export function databaseLock(db: string): string {
  return `db:${db.toLowerCase()}`;
}
