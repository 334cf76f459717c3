/** A growable byte buffer for building encoded keys and hash inputs. Internal to core. */
export class ByteWriter {
  private bytes: Uint8Array;
  private view: DataView;
  length = 0;

  /** Creates an empty writer with room for `capacity` bytes (it grows as needed). Throws nothing. */
  constructor(capacity = 32) {
    this.bytes = new Uint8Array(capacity);
    this.view = new DataView(this.bytes.buffer);
  }

  /** Forgets the bytes written so far, keeping the capacity. Throws nothing. */
  reset(): void {
    this.length = 0;
  }

  /** Appends one byte (0-255). Throws nothing. */
  byte(value: number): void {
    this.reserve(1);
    this.bytes[this.length++] = value;
  }

  /** Appends raw bytes. Throws nothing. */
  raw(values: Uint8Array): void {
    this.reserve(values.length);
    this.bytes.set(values, this.length);
    this.length += values.length;
  }

  /** Appends a 32-bit unsigned integer, big-endian. Throws nothing. */
  uint32BE(value: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, value >>> 0, false);
    this.length += 4;
  }

  /** Appends a 32-bit integer, little-endian. Throws nothing. */
  int32LE(value: number): void {
    this.reserve(4);
    this.view.setInt32(this.length, value | 0, true);
    this.length += 4;
  }

  /** Appends a 64-bit signed integer, little-endian. Throws nothing. */
  int64LE(value: bigint): void {
    this.reserve(8);
    this.view.setBigInt64(this.length, value, true);
    this.length += 8;
  }

  /** Appends a 64-bit unsigned integer, big-endian. Throws nothing. */
  uint64BE(value: bigint): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, value, false);
    this.length += 8;
  }

  /** Returns a copy of the bytes written so far. Throws nothing. */
  toBytes(): Uint8Array {
    return this.bytes.slice(0, this.length);
  }

  /** Returns the underlying buffer, whose first `length` bytes are those written (not a copy). Throws nothing. */
  buffer(): Uint8Array {
    return this.bytes;
  }

  /** Returns the bytes written so far as a binary string (one char per byte). Throws nothing. */
  toBinaryString(): string {
    return bytesToLatin1(this.bytes, this.length);
  }

  private reserve(extra: number): void {
    if (this.length + extra <= this.bytes.length) return;
    const next = new Uint8Array(Math.max(this.bytes.length * 2, this.length + extra));
    next.set(this.bytes.subarray(0, this.length));
    this.bytes = next;
    this.view = new DataView(next.buffer);
  }
}

/** Returns the first `length` bytes as a binary string (one char per byte). Throws nothing. */
export function bytesToLatin1(bytes: Uint8Array, length: number = bytes.length): string {
  // apply() takes the typed array directly; chunks keep the argument count below engine limits.
  if (length <= 4096) return String.fromCharCode.apply(null, bytes.subarray(0, length) as unknown as number[]);
  let out = '';
  for (let i = 0; i < length; i += 4096)
    out += String.fromCharCode.apply(null, bytes.subarray(i, Math.min(length, i + 4096)) as unknown as number[]);
  return out;
}
