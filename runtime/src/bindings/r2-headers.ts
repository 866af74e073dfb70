// The headers workerd's config injects on every R2 and D1 request of a binding (docs/bindings.md
// "R2 buckets", "D1 databases"): they name the application and bucket, and a worker cannot set them, since workerd
// replaces any header of these names. The bindings socket (kv-socket.ts) tells an R2 request from
// a KV one by them.

export const R2_APPLICATION_HEADER = 'cell-r2-application';
export const R2_BUCKET_HEADER = 'cell-r2-bucket';

/** D1's alike (docs/bindings.md "D1 databases"): the application and the database's name. */
export const D1_APPLICATION_HEADER = 'cell-d1-application';
export const D1_DATABASE_HEADER = 'cell-d1-database';
/** The D1 socket's file name, beside the bindings socket (d1-socket.ts). */
export const D1_SOCKET = 'd1.sock';
