import type { ControlPlaneRole } from './control-plane-auth.js';
import type { ControlPlaneLoaders, ControlPlaneReadsService } from './control-plane-reads.service.js';

/** What every GraphQL operation carries: the caller's role and, made on first use, its batch loaders. */
export interface ControlPlaneContext {
  role: ControlPlaneRole | undefined;
  loaders?: ControlPlaneLoaders;
}

/** The operation's loaders, made on first use so each request (or subscription event) batches on its own. */
export function loadersOf(context: ControlPlaneContext, reads: ControlPlaneReadsService): ControlPlaneLoaders {
  context.loaders ??= reads.loaders();
  return context.loaders;
}
