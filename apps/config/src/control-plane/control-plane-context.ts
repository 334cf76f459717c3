import type { Principal } from '@tessera/protocol';
import type { ControlPlaneLoaders, ControlPlaneReadsService } from './control-plane-reads.service.js';

/**
 * What every GraphQL operation carries: the caller's credentials as sent, where it called from,
 * its principal once the guard has verified it (shared by the operation's root fields) and, made
 * on first use, its batch loaders.
 */
export interface ControlPlaneContext {
  authorization: unknown;
  remoteAddress: string | undefined;
  principal?: Promise<Principal>;
  loaders?: ControlPlaneLoaders;
}

/** The operation's loaders, made on first use so each request (or subscription event) batches on its own. */
export function loadersOf(context: ControlPlaneContext, reads: ControlPlaneReadsService): ControlPlaneLoaders {
  context.loaders ??= reads.loaders();
  return context.loaders;
}
