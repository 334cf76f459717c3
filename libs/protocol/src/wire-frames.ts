/**
 * The frames of the internal wire (see wire-client.ts): one message is
 *
 *   [u32 frame length][u32 head length][head: JSON][body: UTF-8 JSON text, as signed]
 *
 * lengths big-endian, each counting the bytes after it. The body travels as the bytes the
 * sender signed, never re-encoded inside the head, so the receiver checks the HMAC over exactly
 * what arrived and parses it once.
 */
export const WIRE_PROTOCOL = 'tessera-wire/1';
/** The path a client asks to upgrade from HTTP; the request is signed as any internal request. */
export const WIRE_PATH = '/internal/wire';
/**
 * The method of a request frame the wire answers itself, at once, with status 200 and no body:
 * a client's check that a connection gone silent still reaches its node. It carries no
 * signature and reaches no route.
 */
export const PING = 'PING';

/** What a request frame's head says besides its body: the HTTP request it stands for. */
export interface WireRequestHead {
  /** Chosen by the client, unique among its requests in flight on the connection. */
  id: number;
  method: string;
  path: string;
  /** The internal request's headers (signature, date, vector time, request id), by lower-case name. */
  headers: Record<string, string>;
}

/** A response frame's head: the status and headers the HTTP route would have answered. */
export interface WireResponseHead {
  id: number;
  status: number;
  headers: Record<string, string>;
}

/** A frame as it came: its head and its body, the bytes the sender signed. */
export interface Frame<Head> {
  head: Head;
  body: Buffer;
}

/** A frame over the reader's limit: its head was read, its body dropped unread. */
export interface OversizedFrame<Head> {
  head: Head;
  /** The length of the body dropped. */
  oversizedBytes: number;
}

/** The longest head a frame may have: a request's method, path and headers. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** Leftover bytes are copied out of a buffer this much larger, rather than keep it alive. */
const PIN_LIMIT_BYTES = 1024 * 1024;

export class WireFrameError extends Error {
  override readonly name = 'WireFrameError';
}

export function encodeFrame(head: WireRequestHead | WireResponseHead, body: string): Buffer {
  const headText = JSON.stringify(head);
  const headBytes = Buffer.byteLength(headText);
  const bodyBytes = Buffer.byteLength(body);
  const frame = Buffer.allocUnsafe(8 + headBytes + bodyBytes);
  frame.writeUInt32BE(4 + headBytes + bodyBytes, 0);
  frame.writeUInt32BE(headBytes, 4);
  frame.write(headText, 8, 'utf8');
  frame.write(body, 8 + headBytes, 'utf8');
  return frame;
}

/**
 * Cuts a byte stream into frames, whatever the chunking. A frame longer than `maxFrameBytes`
 * comes out as an `OversizedFrame`: its head is read and its body dropped as it arrives, so
 * only its own message fails and the connection goes on. A frame whose head is not a JSON
 * object with a numeric id, or is longer than `MAX_HEAD_BYTES`, throws `WireFrameError`: the
 * stream cannot be trusted past it, and the connection should close.
 */
export class FrameReader<Head extends { id: number }> {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** The bytes the next frame needs in all, once its length is known: until then, chunks wait uncopied. */
  private needed = 4;
  /** What is left to drop of an oversized frame's body. */
  private skipping = 0;

  constructor(private readonly maxFrameBytes: number) {}

  /** Takes the next chunk; answers the frames it completed, in order. */
  push(chunk: Buffer): Array<Frame<Head> | OversizedFrame<Head>> {
    if (this.skipping > 0) {
      const dropped = Math.min(this.skipping, chunk.length);
      this.skipping -= dropped;
      if (dropped === chunk.length) return [];
      chunk = chunk.subarray(dropped);
    }
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < this.needed) return [];
    const buffer = this.pending.length === 1 ? chunk : Buffer.concat(this.pending, this.pendingBytes);
    const frames: Array<Frame<Head> | OversizedFrame<Head>> = [];
    let offset = 0;
    this.needed = 4;
    while (buffer.length - offset >= 4) {
      const length = buffer.readUInt32BE(offset);
      const available = buffer.length - offset - 4;
      if (length > this.maxFrameBytes) {
        if (available < 4) {
          this.needed = 8;
          break;
        }
        const headBytes = buffer.readUInt32BE(offset + 4);
        if (headBytes > MAX_HEAD_BYTES) throw new WireFrameError(`frame head of ${headBytes} bytes is over the limit of ${MAX_HEAD_BYTES}`);
        if (headBytes > length - 4) throw new WireFrameError('frame head is longer than its frame');
        if (available < 4 + headBytes) {
          this.needed = 8 + headBytes;
          break;
        }
        const bodyBytes = length - 4 - headBytes;
        frames.push({ head: this.decodeHead(buffer, offset + 8, headBytes), oversizedBytes: bodyBytes });
        const arrived = Math.min(bodyBytes, available - 4 - headBytes);
        offset += 8 + headBytes + arrived;
        this.skipping = bodyBytes - arrived;
        continue;
      }
      if (available < length) {
        this.needed = 4 + length;
        break;
      }
      frames.push(this.decode(buffer.subarray(offset + 4, offset + 4 + length)));
      offset += 4 + length;
    }
    const rest = buffer.subarray(offset);
    this.pending = rest.length === 0 ? [] : [offset > PIN_LIMIT_BYTES ? Buffer.from(rest) : rest];
    this.pendingBytes = rest.length;
    return frames;
  }

  private decode(frame: Buffer): Frame<Head> {
    const headBytes = frame.length >= 4 ? frame.readUInt32BE(0) : Number.POSITIVE_INFINITY;
    if (headBytes > frame.length - 4) throw new WireFrameError('frame head is longer than its frame');
    return { head: this.decodeHead(frame, 4, headBytes), body: frame.subarray(4 + headBytes) };
  }

  private decodeHead(buffer: Buffer, start: number, bytes: number): Head {
    let head: unknown;
    try {
      head = JSON.parse(buffer.toString('utf8', start, start + bytes));
    } catch {
      throw new WireFrameError('frame head is not JSON');
    }
    if (typeof head !== 'object' || head === null || typeof (head as { id?: unknown }).id !== 'number') {
      throw new WireFrameError('frame head has no numeric id');
    }
    return head as Head;
  }
}
