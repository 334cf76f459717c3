import { SetMetadata } from '@nestjs/common';

/** The metadata key `@AdminOnly()` sets and `ControlPlaneGuard` reads. */
export const ADMIN_ONLY = 'tessera:control-plane:admin-only';

/**
 * Marks a query that only the admin token may run, for what operators see but viewers should
 * not (key ids, ...). Mutations need no mark: the guard gives them to admins already.
 */
export const AdminOnly = (): MethodDecorator & ClassDecorator => SetMetadata(ADMIN_ONLY, true);
