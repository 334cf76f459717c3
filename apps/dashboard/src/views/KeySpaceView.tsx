import { type KeyboardEvent, type MouseEvent, useCallback, useEffect, useRef, useState } from 'react';
import { ErrorLine, PerCollection, ShardTag } from '../components';
import { bound, bytes, count, shardColor } from '../format';
import { useSigned, useStream } from '../hooks';
import { type ChunkFields, type ChunkView, applyPlacement, chunkAtColumn, chunkView, layoutBand, zoneSpan } from '../keyspace';

const CHUNK_FIELDS = 'min max shard version jumbo estimatedSizeBytes';
const PAGE = `query($ns: String!, $after: String) {
  collection(ns: $ns) { keyPattern zones { min max zone } chunks(first: 400, after: $after) { totalCount nodes { ${CHUNK_FIELDS} } pageInfo { endCursor hasNextPage } } }
}`;
const PLACEMENT = `subscription($ns: String, $since: Float) {
  chunkPlacementChanged(ns: $ns, since: $since) { seq reason time before { ${CHUNK_FIELDS} } after { ${CHUNK_FIELDS} } }
}`;
const HISTORY = 'query($ns: String!, $key: JSON!) { chunkForKey(ns: $ns, key: $key) { history } }';

interface Zone {
  min: string;
  max: string;
  zone: string;
}
interface Loaded {
  /** Which read this is: a stream runs only for the latest one. */
  generation: number;
  since: number;
  keyPattern: Record<string, unknown>;
  zones: Zone[];
}
interface Placement {
  seq: number;
  reason: string;
  time: string;
  before: ChunkFields[];
  after: ChunkFields[];
}

const BAND_HEIGHT = 56;
const MARK_HEIGHT = 8;
const ZONE_HEIGHT = 18;
const HIGHLIGHT_MS = 2_000;

export function KeySpaceView({ params }: { params: URLSearchParams }) {
  return <PerCollection params={params} view="keyspace" render={(ns, shards) => <Band ns={ns} shards={shards} />} />;
}

/**
 * The whole key range of one collection as a band cut into chunks, coloured by shard, drawn on a
 * canvas (one pass over the chunks per frame, see layoutBand). It reads the chunks a page at a
 * time after noting the last event seq, then applies every placement change pushed after that
 * seq; a change that does not fit what it holds makes it read the chunks again.
 */
function Band({ ns, shards }: { ns: string; shards: string[] }) {
  const { plane } = useSigned();
  const chunks = useRef<ChunkView[]>([]);
  const [loaded, setLoaded] = useState<Loaded>();
  const [reloads, setReloads] = useState(0);
  const [error, setError] = useState<Error>();
  const [progress, setProgress] = useState('');
  const [cursor, setCursor] = useState(-1);
  const [lastChange, setLastChange] = useState<Placement>();
  const [frameMs, setFrameMs] = useState<number>();
  const canvas = useRef<HTMLCanvasElement>(null);
  const dirty = useRef(true);
  /** When the last change was applied (page clock): frames are drawn while its highlight fades. */
  const lastChangeAt = useRef(0);
  const drawnSeq = useRef(0);
  const shardList = useRef(shards);
  shardList.current = shards;

  useEffect(() => {
    let cancelled = false;
    (async () => {
      const { cluster } = await plane.request<{ cluster: { lastEventSeq: number } }>('{ cluster { lastEventSeq } }');
      const read: ChunkView[] = [];
      let after: string | null = null;
      let first: { keyPattern: Record<string, unknown>; zones: Zone[] } | undefined;
      do {
        const page: {
          collection: {
            keyPattern: Record<string, unknown>;
            zones: Zone[];
            chunks: { totalCount: number; nodes: ChunkFields[]; pageInfo: { endCursor: string | null; hasNextPage: boolean } };
          };
        } = await plane.request(PAGE, { ns, after });
        if (cancelled) return;
        first ??= page.collection;
        for (const c of page.collection.chunks.nodes) read.push(chunkView(c));
        setProgress(`${count(read.length)} of ${count(page.collection.chunks.totalCount)} chunks read`);
        after = page.collection.chunks.pageInfo.hasNextPage ? page.collection.chunks.pageInfo.endCursor : null;
      } while (after !== null);
      chunks.current = read;
      dirty.current = true;
      drawnSeq.current = cluster.lastEventSeq;
      setProgress('');
      setLoaded({ generation: reloads, since: cluster.lastEventSeq, keyPattern: first?.keyPattern ?? {}, zones: first?.zones ?? [] });
    })().catch((e: Error) => !cancelled && setError(e));
    return () => {
      cancelled = true;
    };
  }, [plane, ns, reloads]);

  const onChange = useCallback((change: Placement) => {
    if (change.before.length === 0 && change.after.length === 0) {
      if (change.reason !== 'split' && change.reason !== 'merge') setReloads((n) => n + 1);
      return;
    }
    if (!applyPlacement(chunks.current, change.before, change.after, performance.now())) {
      setReloads((n) => n + 1);
      return;
    }
    drawnSeq.current = change.seq;
    lastChangeAt.current = performance.now();
    dirty.current = true;
    setLastChange(change);
  }, []);
  const [streamError, setStreamError] = useState<Error>();

  useEffect(() => {
    let frame = 0;
    const draw = () => {
      frame = requestAnimationFrame(draw);
      const element = canvas.current;
      if (element === null) return;
      const now = performance.now();
      const highlighted = now - lastChangeAt.current < HIGHLIGHT_MS + 100;
      const width = element.clientWidth;
      if (!dirty.current && !highlighted && element.width === Math.round(width * devicePixelRatio)) return;
      dirty.current = false;
      const started = performance.now();
      drawBand(element, chunks.current, shardList.current, loaded?.zones ?? [], now);
      const took = performance.now() - started;
      // What was drawn, for tests and bench:dashboard: the last seq applied, the chunks, the draw's time.
      element.dataset.seq = String(drawnSeq.current);
      element.dataset.chunks = String(chunks.current.length);
      element.dataset.frameMs = took.toFixed(2);
      setFrameMs(took);
    };
    frame = requestAnimationFrame(draw);
    return () => cancelAnimationFrame(frame);
  }, [loaded]);

  const pick = (e: MouseEvent<HTMLCanvasElement>) => {
    const rect = e.currentTarget.getBoundingClientRect();
    setCursor(chunkAtColumn(Math.floor(e.clientX - rect.left), chunks.current.length, Math.floor(rect.width)));
  };
  const step = (e: KeyboardEvent<HTMLCanvasElement>) => {
    const n = chunks.current.length;
    const moves: Record<string, number> = {
      ArrowRight: 1,
      ArrowLeft: -1,
      PageDown: Math.ceil(n / 20),
      PageUp: -Math.ceil(n / 20),
      Home: -n,
      End: n,
    };
    const move = moves[e.key];
    if (move === undefined || n === 0) return;
    e.preventDefault();
    setCursor((c) => Math.max(0, Math.min(n - 1, (c < 0 ? 0 : c) + move)));
  };
  const chunk = cursor >= 0 ? chunks.current[cursor] : undefined;
  const perShard = new Map<string, number>();
  for (const c of chunks.current) perShard.set(c.shard, (perShard.get(c.shard) ?? 0) + 1);
  const names = [...new Set([...shards, ...perShard.keys()])];

  return (
    <div className="keyspace">
      <ErrorLine error={error ?? streamError} />
      {loaded?.generation === reloads && (
        <PlacementStream key={reloads} ns={ns} since={loaded.since} onChange={onChange} onError={setStreamError} />
      )}
      {progress && <p role="status">{progress}</p>}
      <div className="legend" aria-label="Chunks per shard">
        {names.map((s) => (
          <span key={s} data-testid={`legend-${s}`} data-count={perShard.get(s) ?? 0}>
            <ShardTag shards={shards} shard={s} /> {count(perShard.get(s) ?? 0)}
          </span>
        ))}
        <span className="muted">{frameMs !== undefined && `drawn in ${frameMs.toFixed(1)} ms`}</span>
      </div>
      <canvas
        ref={canvas}
        className="band"
        data-testid="keyspace-band"
        tabIndex={0}
        role="img"
        aria-label={`${count(chunks.current.length)} chunks of ${ns}; use the arrow keys to inspect them`}
        style={{ height: BAND_HEIGHT + MARK_HEIGHT + ZONE_HEIGHT }}
        onMouseMove={pick}
        onMouseLeave={() => setCursor(-1)}
        onKeyDown={step}
      />
      {chunk ? (
        <ChunkDetails ns={ns} chunk={chunk} index={cursor} shards={shards} keyPattern={loaded?.keyPattern ?? {}} />
      ) : (
        <p className="muted">Point at the band (or focus it and use the arrow keys) for a chunk&apos;s range, version, size and history.</p>
      )}
      {lastChange && (
        <p className="muted" aria-live="polite" data-testid="last-change">
          Last change: {lastChange.reason} (seq {lastChange.seq}) at {new Date(lastChange.time).toLocaleTimeString()}
        </p>
      )}
      {loaded && loaded.zones.length > 0 && (
        <ul className="plain" aria-label="Zones">
          {loaded.zones.map((z) => (
            <li key={`${z.zone}${z.min}`}>
              Zone <strong>{z.zone}</strong>: [{bound(JSON.parse(z.min))}, {bound(JSON.parse(z.max))})
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** The placement stream of one read of the chunks: a new read starts a new stream from its seq. */
function PlacementStream({
  ns,
  since,
  onChange,
  onError,
}: {
  ns: string;
  since: number;
  onChange: (change: Placement) => void;
  onError: (error: Error | undefined) => void;
}) {
  const error = useStream<Placement>(PLACEMENT, 'chunkPlacementChanged', { ns }, since, onChange);
  useEffect(() => onError(error), [error, onError]);
  return null;
}

function ChunkDetails({
  ns,
  chunk,
  index,
  shards,
  keyPattern,
}: {
  ns: string;
  chunk: ChunkView;
  index: number;
  shards: string[];
  keyPattern: Record<string, unknown>;
}) {
  const { plane } = useSigned();
  const [history, setHistory] = useState<string>();
  const fields = Object.keys(keyPattern);
  const hashed = Object.values(keyPattern).includes('hashed');
  useEffect(() => {
    setHistory(undefined);
    if (hashed || !Array.isArray(chunk.min) || chunk.min.some((v) => typeof v === 'object' && v !== null && '$minKey' in v)) return;
    const key = Object.fromEntries(fields.map((f, i) => [f, (chunk.min as unknown[])[i]]));
    const timer = setTimeout(() => {
      plane
        .request<{ chunkForKey: { history: Array<{ validAfter: unknown; shard: string }> | null } }>(HISTORY, { ns, key })
        .then((r) => setHistory((r.chunkForKey.history ?? []).map((h) => h.shard).join(' ← ') || '—'))
        .catch(() => setHistory('unavailable'));
    }, 250);
    return () => clearTimeout(timer);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [plane, ns, chunk.minKey, chunk.version]);
  return (
    <dl className="chunk" aria-live="polite" data-testid="chunk-details">
      <dt>Chunk</dt>
      <dd>#{index + 1}</dd>
      <dt>Range</dt>
      <dd className="mono">
        [{bound(chunk.min)}, {bound(chunk.max)})
      </dd>
      <dt>Shard</dt>
      <dd>
        <ShardTag shards={shards} shard={chunk.shard} />
      </dd>
      <dt>Version</dt>
      <dd className="mono">{chunk.version}</dd>
      <dt>Size</dt>
      <dd>{bytes(chunk.estimatedSizeBytes)}</dd>
      {chunk.jumbo && (
        <>
          <dt>Jumbo</dt>
          <dd className="warn">yes</dd>
        </>
      )}
      <dt>History</dt>
      <dd>{hashed ? 'not shown for hashed keys' : (history ?? '…')}</dd>
    </dl>
  );
}

/** Draws the band: each pixel column stacked by the shards of the chunks it covers, jumbo marks, recent changes above, zones below. */
function drawBand(element: HTMLCanvasElement, chunks: readonly ChunkView[], shards: readonly string[], zones: Zone[], now: number): void {
  const width = Math.max(1, Math.floor(element.clientWidth));
  const height = BAND_HEIGHT + MARK_HEIGHT + ZONE_HEIGHT;
  const ratio = devicePixelRatio || 1;
  if (element.width !== Math.round(width * ratio)) element.width = Math.round(width * ratio);
  if (element.height !== Math.round(height * ratio)) element.height = Math.round(height * ratio);
  const ctx = element.getContext('2d');
  if (ctx === null) return;
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, width, height);
  const layout = layoutBand(chunks, width, shards);
  const s = layout.shards.length;
  const colors = layout.shards.map((name) => shardColor(shards, name));
  for (let x = 0; x < width; x++) {
    let total = 0;
    for (let j = 0; j < s; j++) total += layout.counts[x * s + j]!;
    if (total === 0) continue;
    let y = MARK_HEIGHT;
    for (let j = 0; j < s; j++) {
      const n = layout.counts[x * s + j]!;
      if (n === 0) continue;
      const h = (n / total) * BAND_HEIGHT;
      ctx.fillStyle = colors[j]!;
      ctx.fillRect(x, y, 1, h + 0.5);
      y += h;
    }
    if (layout.jumbo[x]) {
      ctx.fillStyle = '#B00020';
      ctx.fillRect(x, MARK_HEIGHT + BAND_HEIGHT - 6, 1, 6);
    }
    const since = now - layout.changedAt[x]!;
    if (layout.changedAt[x]! > 0 && since < HIGHLIGHT_MS) {
      ctx.fillStyle = `rgba(17, 17, 17, ${1 - since / HIGHLIGHT_MS})`;
      ctx.fillRect(Math.max(0, x - 1), 0, 3, MARK_HEIGHT - 2);
    }
  }
  // Chunk boundaries while chunks are wider than 4 px, so single chunks can be told apart.
  if (chunks.length > 0 && width / chunks.length >= 4) {
    ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
    for (let i = 1; i < chunks.length; i++) ctx.fillRect(Math.round((i * width) / chunks.length), MARK_HEIGHT, 1, BAND_HEIGHT);
  }
  ctx.font = '11px system-ui, sans-serif';
  for (const zone of zones) {
    const span = zoneSpan(chunks, JSON.parse(zone.min), JSON.parse(zone.max));
    if (span === null) continue;
    const x0 = (span[0] * width) / chunks.length;
    const x1 = (span[1] * width) / chunks.length;
    ctx.fillStyle = '#E8E8E8';
    ctx.fillRect(x0, MARK_HEIGHT + BAND_HEIGHT + 2, Math.max(1, x1 - x0 - 1), ZONE_HEIGHT - 3);
    ctx.fillStyle = '#111111';
    ctx.fillText(zone.zone, x0 + 3, MARK_HEIGHT + BAND_HEIGHT + ZONE_HEIGHT - 5, Math.max(1, x1 - x0 - 6));
  }
}
