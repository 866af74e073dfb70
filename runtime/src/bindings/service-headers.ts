// The names a workerd config and the services socket (service.ts) share (docs/bindings.md
// "Service bindings"), apart from the socket so that the config's writer imports no listener.

/** The services socket's file name, in the folder of the bindings socket. */
export const SERVICES_SOCKET = 'services.sock';
/** The application making the call, injected by workerd's config; never forwarded. */
export const SERVICE_CALLER_HEADER = 'cell-service-caller';
/** The application the binding reaches, injected by workerd's config; never forwarded. */
export const SERVICE_TARGET_HEADER = 'cell-service-target';
/** What the call is, injected by workerd's config: `fetch`, or `rpc` from the wrapped binding. */
export const SERVICE_CALL_HEADER = 'cell-service-call';
/** The target's RPC key, added by the services socket to a JS RPC call only; never from a worker. */
export const SERVICE_RPC_KEY_HEADER = 'cell-service-rpc-key';
/** Marks the answer of the target's RPC entry, so that a caller tells it from any other answer. */
export const SERVICE_RPC_ANSWER_HEADER = 'cell-service-rpc-answer';
/** The path a JS RPC call is sent on to the target's front. */
export const SERVICE_RPC_PATH = '/.well-known/cell/service-rpc';
