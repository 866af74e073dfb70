// GET /v1/state (docs/api.md "State"; docs/fleet.md "GET /v1/state"): node and admin
// operator callers get the whole document; a non-admin operator gets it narrowed to the
// applications its key reaches, with `scoped: true` (even when its scope reaches everything).

import type { FastifyInstance } from 'fastify';
import type { Caller } from '../../auth/caller.ts';
import { patternsReach } from '../../auth/caller.ts';
import type { CoordinatorLease, NodeRecord, ProcessStatus } from '../../registry/records.ts';
import type { CoordinatorView, FleetView, NodeContext } from '../context.ts';
import type { PlacementView, ReconcileStatus } from '../fleet/reconcile.ts';

export interface DaemonState {
  node: NodeRecord | null;
  lease: CoordinatorLease | null;
  coordinator: CoordinatorView | null;
  processes: ProcessStatus[];
  placements: PlacementView[];
  reconcile?: ReconcileStatus;
  scoped?: true;
}

export function stateRoutes(app: FastifyInstance, ctx: NodeContext): void {
  app.get('/v1/state', { config: { auth: 'node-or-operator' } }, async (request) =>
    stateFor(request.caller, daemonState(ctx.fleet)),
  );
}

/** The whole document; a node that runs no fleet loop reports nothing but empty lists. */
export function daemonState(fleet: FleetView | undefined): DaemonState {
  if (!fleet) return { node: null, lease: null, coordinator: null, processes: [], placements: [] };
  return {
    node: fleet.node(),
    lease: fleet.lease(),
    coordinator: fleet.coordinator(),
    processes: fleet.processes(),
    placements: fleet.placements(),
    reconcile: fleet.reconcile(),
  };
}

/** Narrows the document for a non-admin operator; anyone else gets it whole. */
export function stateFor(caller: Caller, state: DaemonState): DaemonState {
  if (caller.kind === 'node') return state;
  if (caller.kind === 'operator' && caller.role === 'admin') return state;
  const reaches =
    caller.kind === 'operator'
      ? (application: string) => patternsReach(caller.applications, application)
      : () => false;
  const processes = (list: ProcessStatus[]) => list.filter((p) => reaches(p.application));
  const coordinator = state.coordinator && {
    ...state.coordinator,
    ...(state.coordinator.unplaced
      ? { unplaced: state.coordinator.unplaced.filter((u) => reaches(u.application)) }
      : {}),
  };
  return {
    node: state.node && { ...state.node, processes: processes(state.node.processes) },
    lease: state.lease,
    coordinator,
    processes: processes(state.processes),
    placements: state.placements.filter((p) => reaches(p.application)),
    ...(state.reconcile
      ? { reconcile: { ...state.reconcile, desired: state.reconcile.desired.filter(reaches) } }
      : {}),
    scoped: true,
  };
}
