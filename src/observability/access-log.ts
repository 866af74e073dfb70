// One line of the JSON access log the shipped Caddyfile writes (Caddy's own format: logger
// `http.log.access...`, `request.host`, `request.uri`, `status`, `size` = response body bytes,
// `bytes_read` = request body bytes, `duration` in seconds). The file is written by another
// program and may hold anything, so the parser answers null for any line it cannot use and never
// throws.

export interface AccessEntry {
  host: string;
  uri: string;
  status: number;
  bytesIn: number;
  bytesOut: number;
  durationMs: number;
}

const MAX_LINE_CHARS = 1 << 20;

export function parseAccessLine(line: string): AccessEntry | null {
  if (line.length === 0 || line.length > MAX_LINE_CHARS || line.trimStart()[0] !== '{') return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (!isObject(value)) return null;
  if (typeof value.logger !== 'string' || !value.logger.startsWith('http.log.access')) return null;
  const request = value.request;
  if (!isObject(request) || typeof request.host !== 'string') return null;
  const uri = typeof request.uri === 'string' ? request.uri : '/';
  const status = value.status;
  const duration = value.duration;
  const size = value.size ?? 0;
  const read = value.bytes_read ?? 0;
  if (!Number.isInteger(status) || (status as number) < 0 || (status as number) > 999) return null;
  if (typeof duration !== 'number' || duration < 0) return null;
  // A duration finite in seconds can still overflow once in milliseconds.
  const durationMs = duration * 1000;
  if (!Number.isFinite(durationMs)) return null;
  if (!isCount(size) || !isCount(read)) return null;
  return {
    host: request.host,
    uri,
    status: status as number,
    bytesIn: read,
    bytesOut: size,
    durationMs,
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}
