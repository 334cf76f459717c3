// Documents of a given size. The size that matters to the cluster is what a shard stores and
// measures (the document as JSON), so the builder pads the JSON text to exactly DOC_BYTES bytes.

export type DocumentFields = Record<string, string | number | boolean>;

/** ASCII only, so one character is one byte of the JSON text. */
const PAD_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** The length of `value` as UTF-8 JSON text. Fields here are ASCII, so characters are bytes. */
export function jsonBytes(value: unknown): number {
  return JSON.stringify(value).length;
}

/**
 * `fields` plus a `pad` string that brings the document's JSON text to exactly `docBytes` bytes
 * (or just over, when the fields alone are larger). The pad is varied by `seed` so documents do
 * not compress to nothing, without costing a random number per byte.
 */
export function buildDocument(fields: DocumentFields, docBytes: number, seed = 0): DocumentFields & { pad: string } {
  const empty = { ...fields, pad: '' };
  const padLength = Math.max(0, docBytes - jsonBytes(empty));
  return { ...fields, pad: padOf(padLength, seed) };
}

function padOf(length: number, seed: number): string {
  const unit = PAD_ALPHABET.slice(seed % PAD_ALPHABET.length) + PAD_ALPHABET.slice(0, seed % PAD_ALPHABET.length);
  return unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
}
