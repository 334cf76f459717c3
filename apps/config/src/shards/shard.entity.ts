import { Column, Entity, PrimaryColumn } from 'typeorm';
import type { ShardState } from '@tessera/protocol';

/** A row of the shard registry (MongoDB's config.shards). */
@Entity({ name: 'shards' })
export class ShardEntity {
  @PrimaryColumn({ type: 'text' })
  name!: string;

  @Column({ type: 'text', unique: true })
  url!: string;

  @Column({ type: 'text' })
  state!: ShardState;

  @Column({ type: 'text', array: true })
  zones!: string[];

  @Column({ name: 'added_at', type: 'timestamptz' })
  addedAt!: Date;
}
