import { describe, expect, it } from 'vitest';
import { parseCopyRows, unescapeCopyText } from './copy-transfer.js';

describe('COPY text rows', () => {
  it('reads id, shard key, size and the document, undoing COPY escapes', () => {
    const doc = JSON.stringify({ _id: 1, s: 'tab\there, quote " and backslash \\ and newline\n' });
    // COPY text doubles each backslash of the field; JSON.stringify left no raw tab or newline.
    const line = `\\\\x0a01\t\\\\x0b02\t${doc.replaceAll('\\', '\\\\')}\t42\n`;
    const [row] = parseCopyRows(line + line);
    expect(row).toMatchObject({ id: '0a01', key: '0b02', size: 42 });
    expect(JSON.parse(row!.doc)).toEqual(JSON.parse(doc));
    expect(parseCopyRows(line + line)).toHaveLength(2);
  });

  it('unescapes every COPY sequence', () => {
    expect(unescapeCopyText('a\\tb\\nc\\\\d\\re')).toBe('a\tb\nc\\d\re');
    expect(unescapeCopyText('plain')).toBe('plain');
  });

  it('refuses a row that is not COPY text of the collection table', () => {
    expect(() => parseCopyRows('just one column\n')).toThrow(/malformed COPY row/);
    expect(() => parseCopyRows('0a\t0b\t{}\t1\n')).toThrow(/hex bytea/);
  });
});
