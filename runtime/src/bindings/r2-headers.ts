// The headers workerd's config injects on every R2 request of a binding (docs/bindings.md "R2
// buckets"): they name the application and bucket, and a worker cannot set them, since workerd
// replaces any header of these names. The bindings socket (kv-socket.ts) tells an R2 request from
// a KV one by them.

export const R2_APPLICATION_HEADER = 'cell-r2-application';
export const R2_BUCKET_HEADER = 'cell-r2-bucket';
