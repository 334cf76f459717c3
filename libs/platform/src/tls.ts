import { readFileSync } from 'node:fs';
import { SettingsError } from './settings.js';

/** The TLS files of a node's settings (see commonSettingsShape). */
export interface TlsFiles {
  readonly TESSERA_TLS_CERT_FILE?: string | undefined;
  readonly TESSERA_TLS_KEY_FILE?: string | undefined;
  readonly TESSERA_TLS_CA_FILE?: string | undefined;
}

/**
 * The certificate and key the node serves HTTPS with, read from their files, or undefined for
 * plain HTTP. Throws `SettingsError` naming the variable for one without the other or a file
 * that cannot be read, so a node never starts in the clear by mistake.
 */
export function serverTls(settings: TlsFiles): { cert: Buffer; key: Buffer } | undefined {
  const { TESSERA_TLS_CERT_FILE: certFile, TESSERA_TLS_KEY_FILE: keyFile } = settings;
  if (certFile === undefined && keyFile === undefined) return undefined;
  if (certFile === undefined || keyFile === undefined) {
    const missing = certFile === undefined ? 'TESSERA_TLS_CERT_FILE' : 'TESSERA_TLS_KEY_FILE';
    throw new SettingsError([
      `${missing}: is required with ${missing === 'TESSERA_TLS_CERT_FILE' ? 'TESSERA_TLS_KEY_FILE' : 'TESSERA_TLS_CERT_FILE'} (not set)`,
    ]);
  }
  return { cert: readSetting('TESSERA_TLS_CERT_FILE', certFile), key: readSetting('TESSERA_TLS_KEY_FILE', keyFile) };
}

/** The certificate authorities the node trusts when it calls other nodes over HTTPS; undefined: the system's. */
export function trustedCa(settings: TlsFiles): Buffer | undefined {
  return settings.TESSERA_TLS_CA_FILE === undefined ? undefined : readSetting('TESSERA_TLS_CA_FILE', settings.TESSERA_TLS_CA_FILE);
}

function readSetting(name: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    throw new SettingsError([`${name}: cannot read ${file}: ${(error as Error).message}`]);
  }
}
