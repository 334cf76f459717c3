import { Identity1763900000000 } from './1763900000000-identity.js';
import { Collections1763900100000 } from './1763900100000-collections.js';
import { Indexes1763900200000 } from './1763900200000-indexes.js';
import { Migrations1763900300000 } from './1763900300000-migrations.js';
import { ShardKeySizes1763902000000 } from './1763902000000-shard-key-sizes.js';
import { Transactions1763903000000 } from './1763903000000-transactions.js';
import { TxnStatementsInRecords1764100000000 } from './1764100000000-txn-statements-in-records.js';
import { TxnRecordLog1764200000000 } from './1764200000000-txn-record-log.js';
import { DocumentHistory1764300000000 } from './1764300000000-document-history.js';
import { TwoPhaseCommit1764400000000 } from './1764400000000-two-phase-commit.js';
import { MovePrimary1764500000000 } from './1764500000000-move-primary.js';
import { ParallelDonations1764600000000 } from './1764600000000-parallel-donations.js';
import { CollectionSizes1764700000000 } from './1764700000000-collection-sizes.js';

/** A shard database's migrations, in order. */
export const shardMigrations = [
  Identity1763900000000,
  Collections1763900100000,
  Indexes1763900200000,
  Migrations1763900300000,
  ShardKeySizes1763902000000,
  Transactions1763903000000,
  TxnStatementsInRecords1764100000000,
  TxnRecordLog1764200000000,
  DocumentHistory1764300000000,
  TwoPhaseCommit1764400000000,
  MovePrimary1764500000000,
  ParallelDonations1764600000000,
  CollectionSizes1764700000000,
];
