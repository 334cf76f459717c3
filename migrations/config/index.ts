import { Registry1763900000000 } from './1763900000000-registry.js';
import { Catalog1763900100000 } from './1763900100000-catalog.js';
import { ActiveMigrations1763900200000 } from './1763900200000-active-migrations.js';
import { MigrationDecisions1763900300000 } from './1763900300000-migration-decisions.js';
import { EventSequence1763900900000 } from './1763900900000-event-sequence.js';
import { BalancerState1763901000000 } from './1763901000000-balancer-state.js';
import { Sessions1763901100000 } from './1763901100000-sessions.js';
import { ClusterTimeKeys1764200000000 } from './1764200000000-cluster-time-keys.js';
import { ChunkDocumentEstimates1764300000000 } from './1764300000000-chunk-document-estimates.js';
import { ForegroundLoad1764400000000 } from './1764400000000-foreground-load.js';
import { AccessControl1764500000000 } from './1764500000000-access-control.js';
import { AuditStream1764600000000 } from './1764600000000-audit-stream.js';

/** The config database's migrations, in order. Listed explicitly: globs do not load under ESM. */
export const configMigrations = [
  Registry1763900000000,
  Catalog1763900100000,
  ActiveMigrations1763900200000,
  MigrationDecisions1763900300000,
  EventSequence1763900900000,
  BalancerState1763901000000,
  Sessions1763901100000,
  ClusterTimeKeys1764200000000,
  ChunkDocumentEstimates1764300000000,
  ForegroundLoad1764400000000,
  AccessControl1764500000000,
  AuditStream1764600000000,
];
