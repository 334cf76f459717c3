import { Fragment, type ReactNode } from 'react';
import { useBasics } from './basics';
import { shardColor } from './format';

export function ErrorLine({ error }: { error: Error | string | undefined }) {
  if (error === undefined) return null;
  const code = typeof error === 'string' ? undefined : (error as Error & { code?: string }).code;
  return (
    <p role="alert" className="error">
      {code ? `${code}: ` : ''}
      {typeof error === 'string' ? error : error.message}
    </p>
  );
}

/** A titled panel; a wide one holds tables that may scroll sideways on a phone, so it takes focus to scroll by keyboard. */
export function Card({ title, children, wide }: { title: string; children: ReactNode; wide?: boolean }) {
  return (
    <section className={wide ? 'card wide' : 'card'} aria-label={title} tabIndex={wide ? 0 : undefined}>
      <h2>{title}</h2>
      {children}
    </section>
  );
}

export function ShardTag({ shards, shard }: { shards: readonly string[]; shard: string }) {
  return (
    <span className="shard">
      <span className="swatch" style={{ background: shardColor(shards, shard) }} aria-hidden="true" />
      {shard}
    </span>
  );
}

/** A collection picker over the sharded collections; the choice lives in the URL (?ns=). */
export function CollectionPicker({ namespaces, ns, view }: { namespaces: string[]; ns: string | undefined; view: string }) {
  return (
    <label className="picker">
      Collection{' '}
      <select value={ns ?? ''} onChange={(e) => (location.hash = `#/${view}?ns=${encodeURIComponent(e.target.value)}`)}>
        {ns === undefined && <option value="">choose…</option>}
        {namespaces.map((n) => (
          <option key={n} value={n}>
            {n}
          </option>
        ))}
      </select>
    </label>
  );
}

/**
 * A per-collection view: the collection named by the URL (?ns=), else the first sharded one, with
 * the picker above it; `render` draws the view for that collection (keyed by it, so a new
 * collection starts afresh), with the shard names in colour order.
 */
export function PerCollection({
  params,
  view,
  render,
}: {
  params: URLSearchParams;
  view: string;
  render: (ns: string, shards: string[]) => ReactNode;
}) {
  const basics = useBasics();
  const ns = params.get('ns') ?? basics.namespaces[0];
  return (
    <>
      <CollectionPicker namespaces={basics.namespaces} ns={ns} view={view} />
      <ErrorLine error={basics.error} />
      {ns === undefined ? (
        basics.data && <p className="muted">No sharded collection yet.</p>
      ) : (
        <Fragment key={ns}>{render(ns, basics.shards)}</Fragment>
      )}
    </>
  );
}
