/**
 * `$group` and `$sortByCount` under a collation: keys the collation calls equal form one group,
 * where mingo groups by value. Each document's key is evaluated first (mingo's `$addFields`, on a
 * copy), the keys are sorted into classes of equal ones, and mingo's `$group` runs once per class
 * with the class's key. A class's key is its least by bytes, so the answer does not depend on the
 * order the documents came in: the shards' partial groups and the router's final one agree.
 */
import { type Iterator, Lazy } from 'mingo/lazy';
import { type Collation, type Value, type ValueObject, compareValues, stringComparatorFor, valuesEqual } from '@tessera/core';

type Stage = (collection: Iterator, spec: unknown, options: unknown) => Iterator;

/** A field no document of the pipeline uses, to hold a document's group key for a moment. */
const GROUP_KEY = '__tessera_group_key';

/** `$group` that groups by `group`'s own rule without a collation, and by the collation's classes under one. */
export function collatedGroup(group: Stage, addFields: Stage): Stage {
  return (collection, spec, options) => {
    const strings = stringComparatorFor(collationOf(options));
    if (strings === undefined) return group(collection, spec, options);
    const { _id: keySpec, ...accumulators } = spec as ValueObject;
    return collection.transform((input) => {
      const documents = input as ValueObject[];
      const keyed = addFields(Lazy(documents.map((d) => ({ ...d }))), { [GROUP_KEY]: keySpec ?? null }, options).collect() as ValueObject[];
      const classes: Array<{ key: Value; members: ValueObject[] }> = [];
      keyed.forEach((withKey, i) => {
        const key = (withKey[GROUP_KEY] ?? null) as Value;
        const found = classes.find((c) => valuesEqual(c.key, key, strings));
        if (found === undefined) classes.push({ key, members: [documents[i]!] });
        else {
          found.members.push(documents[i]!);
          if (compareValues(key, found.key) < 0) found.key = key;
        }
      });
      return Lazy(
        classes.map(({ key, members }) => {
          const [grouped] = group(Lazy(members), { _id: null, ...accumulators }, options).collect() as ValueObject[];
          return { ...grouped, _id: key };
        }),
      );
    });
  };
}

/** `$sortByCount` as MongoDB defines it, `$group` (by `collatedGroup`) then `$sort` by count, descending. */
export function collatedSortByCount(group: Stage, sortByCount: Stage, sort: Stage): Stage {
  return (collection, spec, options) => {
    if (collationOf(options) === undefined) return sortByCount(collection, spec, options);
    return sort(group(collection, { _id: spec, count: { $sum: 1 } }, options), { count: -1 }, options);
  };
}

/** The pipeline's collation, which `runPipeline` hands mingo with its options. */
export function collationOf(options: unknown): Collation | undefined {
  return (options as { collation?: Collation } | undefined)?.collation;
}
