// The control plane operations the workloads use (schema.graphql at the repository root), and
// the parsing of their answers. Plain strings and functions: the k6 scripts send them with
// k6/http, the end-to-end test with fetch.

export interface GraphqlRequest {
  /** The operation's name, for error messages and request tags. */
  operation: string;
  query: string;
  variables: Record<string, unknown>;
}

export interface GraphqlErrorEntry {
  message: string;
  extensions?: { code?: string; details?: unknown };
}

/** A GraphQL answer with errors, or an HTTP failure of the control plane. `code` is the project's error code when there is one. */
export class ControlPlaneError extends Error {
  constructor(
    readonly operation: string,
    readonly code: string,
    message: string,
  ) {
    super(`${operation}: ${code}: ${message}`);
    this.name = 'ControlPlaneError';
  }
}

export const OPERATIONS = {
  dropCollection: `mutation DropCollection($ns: String!) { dropCollection(ns: $ns) { dropped } }`,
  enableSharding: `mutation EnableSharding($db: String!) { enableSharding(db: $db) { name primaryShard } }`,
  shardCollection: `mutation ShardCollection($input: ShardCollectionInput!) { shardCollection(input: $input) { ns collectionVersion } }`,
  configureCollectionBalancing: `mutation ConfigureCollectionBalancing($ns: String!, $chunkSizeBytes: Float, $enableBalancing: Boolean) {
  configureCollectionBalancing(ns: $ns, chunkSizeBytes: $chunkSizeBytes, enableBalancing: $enableBalancing) { ns }
}`,
  addShard: `mutation AddShard($name: String!, $url: String!) { addShard(name: $name, url: $url) { name url state } }`,
  clusterBaseline: `query ClusterBaseline { cluster { lastEventSeq shards { name state } } }`,
  distribution: `query Distribution($ns: String!) {
  cluster { shards { name } }
  collection(ns: $ns) { ns collectionVersion distribution { shard chunks estimatedDataBytes } }
}`,
  changelog: `query Changelog($ns: String!, $kinds: [String!], $after: String, $first: Int!) {
  changelog(filter: { ns: $ns, kinds: $kinds }, after: $after, first: $first) {
    nodes { seq time kind shard details }
    pageInfo { endCursor hasNextPage }
  }
}`,
  /** The balancer's own rows (rounds and the load throttle's changes), which name no collection. */
  balancerChangelog: `query BalancerChangelog($kinds: [String!], $after: String, $first: Int!) {
  changelog(filter: { kinds: $kinds }, after: $after, first: $first) {
    nodes { seq time kind shard details }
    pageInfo { endCursor hasNextPage }
  }
}`,
  balancerCollectionStatus: `query BalancerCollectionStatus($ns: String!) {
  balancerCollectionStatus(ns: $ns) { balancerCompliant firstComplianceViolation }
}`,
  /** What the subscriptions workload listens to: every split, merge and migration commit of the collection. */
  chunkPlacementChanged: `subscription ChunkPlacementChanged($ns: String, $since: Float) {
  chunkPlacementChanged(ns: $ns, since: $since) { seq time reason }
}`,
} as const;

export type OperationName = keyof typeof OPERATIONS;

export function graphqlRequest(operation: OperationName, variables: Record<string, unknown> = {}): GraphqlRequest {
  return { operation, query: OPERATIONS[operation], variables };
}

/** The body to POST to /graphql. */
export function graphqlBody(request: GraphqlRequest): string {
  return JSON.stringify({ query: request.query, variables: request.variables, operationName: operationNameOf(request.query) });
}

function operationNameOf(query: string): string | undefined {
  return /^\s*(?:query|mutation|subscription)\s+([A-Za-z_][A-Za-z0-9_]*)/.exec(query)?.[1];
}

/**
 * The `data` of a GraphQL answer; throws `ControlPlaneError` on an HTTP failure or on any error
 * in the answer, with the first error's code (`UNAUTHORIZED`, `NAMESPACE_NOT_FOUND`, ...).
 */
export function graphqlData<T>(operation: string, status: number, body: unknown): T {
  const answer = (typeof body === 'object' && body !== null ? body : {}) as { data?: unknown; errors?: GraphqlErrorEntry[] };
  const first = answer.errors?.[0];
  if (first !== undefined) throw new ControlPlaneError(operation, first.extensions?.code ?? 'GRAPHQL_ERROR', first.message);
  if (status !== 200 || answer.data === undefined || answer.data === null)
    throw new ControlPlaneError(
      operation,
      `HTTP_${status}`,
      typeof body === 'string' ? body.slice(0, 300) : JSON.stringify(body).slice(0, 300),
    );
  return answer.data as T;
}

export interface ShardDistribution {
  shard: string;
  chunks: number;
  estimatedDataBytes: number;
}

export interface DistributionAnswer {
  cluster: { shards: Array<{ name: string }> };
  collection: { ns: string; collectionVersion: string; distribution: ShardDistribution[] };
}

export interface ChangelogEvent {
  seq: number;
  time: string;
  kind: string;
  shard: string | null;
  details: Record<string, unknown>;
}

export interface ChangelogAnswer {
  changelog: { nodes: ChangelogEvent[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } };
}

export interface BalancerCollectionStatusAnswer {
  balancerCollectionStatus: { balancerCompliant: boolean; firstComplianceViolation: string | null };
}

export interface ClusterBaselineAnswer {
  cluster: { lastEventSeq: number; shards: Array<{ name: string; state: string }> };
}
