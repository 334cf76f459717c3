/** The database part of `db.collection`. */
export function databaseOf(ns: string): string {
  return ns.slice(0, ns.indexOf('.'));
}
