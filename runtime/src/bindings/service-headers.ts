// The names a workerd config and the services socket (service.ts) share (docs/bindings.md
// "Service bindings"), apart from the socket so that the config's writer imports no listener.

/** The services socket's file name, in the folder of the bindings socket. */
export const SERVICES_SOCKET = 'services.sock';
/** The application making the call, injected by workerd's config; never forwarded. */
export const SERVICE_CALLER_HEADER = 'cell-service-caller';
/** The application the binding reaches, injected by workerd's config; never forwarded. */
export const SERVICE_TARGET_HEADER = 'cell-service-target';
