import { type HotRoute, parseWith } from '@tessera/platform';
import { namespaceOf } from '../api/namespace.js';
import { findBodySchema, insertBodySchema } from '../api/request-schemas.js';
import { callerOf } from '../auth/access-hooks.js';
import type { CurrentOps } from '../operations/current-ops.service.js';
import type { QueryService } from '../reads/query.service.js';
import type { WriteService } from '../writes/write.service.js';

/**
 * The public commands most requests are, served outside Nest's pipeline (see `HotRoute`): insert
 * and find, which pay the pipeline's per-request work on every request and need none of it
 * (A/B figures in docs/benchmarks.md). The collection's other commands are CollectionController's.
 */
export function collectionHotRoutes(writes: WriteService, queries: QueryService, ops: CurrentOps): HotRoute[] {
  return [
    {
      url: '/v1/:db/:coll/insert',
      handle: (body, { db, coll }, { bodyBytes }) => {
        const ns = namespaceOf(db!, coll!);
        const request = parseWith(insertBodySchema, body, 'insert request');
        return ops.run({ op: 'insert', command: 'insert', ns, body: request }, () => writes.insert(ns, request, bodyBytes));
      },
    },
    {
      url: '/v1/:db/:coll/find',
      handle: (body, { db, coll }, { http }) => {
        const ns = namespaceOf(db!, coll!);
        const request = parseWith(findBodySchema, body ?? {}, 'find request');
        const owner = http === undefined ? undefined : callerOf(http);
        return ops.run({ op: 'query', command: 'find', ns, body: request }, () => queries.find(ns, request, owner));
      },
    },
  ];
}
