import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SettingsError, advertisedUrl } from './settings.js';
import { serverTls, trustedCa } from './tls.js';

const dir = mkdtempSync(join(tmpdir(), 'tessera-tls-spec-'));
const cert = join(dir, 'node.pem');
const key = join(dir, 'node.key');
writeFileSync(cert, 'CERT');
writeFileSync(key, 'KEY');

describe('the TLS settings', () => {
  it('serve plain HTTP without files, and HTTPS with a certificate and its key', () => {
    expect(serverTls({})).toBeUndefined();
    expect(serverTls({ TESSERA_TLS_CERT_FILE: cert, TESSERA_TLS_KEY_FILE: key })).toEqual({
      cert: Buffer.from('CERT'),
      key: Buffer.from('KEY'),
    });
    expect(trustedCa({})).toBeUndefined();
    expect(trustedCa({ TESSERA_TLS_CA_FILE: cert })).toEqual(Buffer.from('CERT'));
  });

  it('refuse one file without the other, and a file that cannot be read, naming the variable', () => {
    expect(() => serverTls({ TESSERA_TLS_CERT_FILE: cert })).toThrow(SettingsError);
    expect(() => serverTls({ TESSERA_TLS_CERT_FILE: cert })).toThrow(/TESSERA_TLS_KEY_FILE: is required/);
    expect(() => serverTls({ TESSERA_TLS_KEY_FILE: key })).toThrow(/TESSERA_TLS_CERT_FILE: is required/);
    expect(() => serverTls({ TESSERA_TLS_CERT_FILE: join(dir, 'none.pem'), TESSERA_TLS_KEY_FILE: key })).toThrow(
      /TESSERA_TLS_CERT_FILE: cannot read/,
    );
    expect(() => trustedCa({ TESSERA_TLS_CA_FILE: join(dir, 'none.pem') })).toThrow(/TESSERA_TLS_CA_FILE: cannot read/);
  });

  it('advertise https:// when the node serves TLS', () => {
    expect(advertisedUrl({ TESSERA_HOST: '127.0.0.1', TESSERA_PORT: 7070 })).toBe('http://127.0.0.1:7070');
    expect(advertisedUrl({ TESSERA_HOST: '127.0.0.1', TESSERA_PORT: 7070, TESSERA_TLS_CERT_FILE: cert })).toBe('https://127.0.0.1:7070');
  });
});
