import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { Participant, TransactionDecision, TransactionId } from '@tessera/protocol';
import { clusterTimeFromSql, clusterTimeToSql } from '../history/write-time.js';

/** A coordinator's persisted decision: MongoDB's config.transaction_coordinators document. */
export interface CoordinatorRecord {
  id: TransactionId;
  participants: Participant[];
  decision: TransactionDecision;
  decidedAt: Date;
}

interface Row {
  lsid: string;
  txn_number: string;
  participants: string[];
  decision: 'commit' | 'abort';
  commit_time: string | null;
  decided_at: Date;
}

/** The coordinator's decisions, kept until every participant has acknowledged them. */
@Injectable()
export class CoordinatorStore {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Persists a decision unless one is there already; answers the one that stands. A presumed
   * abort and a commit race here: whichever is written first is the decision.
   */
  async decide(id: TransactionId, participants: readonly Participant[], decision: TransactionDecision): Promise<TransactionDecision> {
    const inserted: unknown[] = await this.dataSource.query(
      `INSERT INTO transaction_coordinators (lsid, txn_number, participants, decision, commit_time)
       VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING 1`,
      [
        id.lsid.id,
        id.txnNumber,
        participants.map((p) => JSON.stringify(p)),
        decision.decision,
        decision.decision === 'commit' ? clusterTimeToSql(decision.commitTime) : null,
      ],
    );
    return inserted.length > 0 ? decision : (await this.find(id))!.decision;
  }

  async find(id: TransactionId): Promise<CoordinatorRecord | undefined> {
    const rows: Row[] = await this.dataSource.query('SELECT * FROM transaction_coordinators WHERE lsid = $1 AND txn_number = $2', [
      id.lsid.id,
      id.txnNumber,
    ]);
    return rows[0] && recordOf(rows[0]);
  }

  /** The commit decisions whose participants may not all have committed: what recovery drives on. */
  async commitsInProgress(): Promise<CoordinatorRecord[]> {
    const rows: Row[] = await this.dataSource.query("SELECT * FROM transaction_coordinators WHERE decision = 'commit'");
    return rows.map(recordOf);
  }

  /** Forgets a decision once every participant applied it. */
  async forget(id: TransactionId): Promise<void> {
    await this.dataSource.query('DELETE FROM transaction_coordinators WHERE lsid = $1 AND txn_number = $2', [id.lsid.id, id.txnNumber]);
  }

  /** Forgets presumed aborts older than `olderThanMs`: no participant of theirs is still prepared. */
  async trimAborts(olderThanMs: number): Promise<number> {
    const rows: unknown[] = await this.dataSource.query(
      `WITH gone AS (DELETE FROM transaction_coordinators WHERE decision = 'abort' AND decided_at < now() - make_interval(secs => $1) RETURNING 1)
       SELECT 1 FROM gone`,
      [olderThanMs / 1000],
    );
    return rows.length;
  }
}

function recordOf(row: Row): CoordinatorRecord {
  return {
    id: { lsid: { id: row.lsid }, txnNumber: Number(row.txn_number) },
    participants: row.participants.map((p) => JSON.parse(p) as Participant),
    decision: row.decision === 'commit' ? { decision: 'commit', commitTime: clusterTimeFromSql(row.commit_time!) } : { decision: 'abort' },
    decidedAt: row.decided_at,
  };
}
