// The head of an HTTP/1.1 answer (status line and header fields), parsed from raw bytes for
// s3-http.ts's GET, which reads its socket into reused buffers instead of through Node's HTTP
// parser (docs/bindings.md "R2 buckets"). It faces the network: any input either parses, is
// incomplete (null: more bytes are needed), or is refused with an HttpHeadError, never anything
// else. Strict on purpose: lines end in CRLF, no folded lines, field names are tokens, a
// Content-Length is digits and agrees with itself; what is not so is refused, and the caller
// gives up on the connection.

/** A head refused as malformed or too large. */
export class HttpHeadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HttpHeadError';
  }
}

export interface HttpHead {
  status: number;
  /** Field names in lower case; a field given more than once is joined with ", ". */
  headers: Record<string, string>;
  /** The Content-Length, or null when the answer gives none. */
  contentLength: number | null;
  /** Bytes of the head, the blank line included: where the body starts. */
  length: number;
}

/** The most a head may take; an S3 answer's is a few hundred bytes, 2 KB more of metadata. */
export const MAX_HEAD_BYTES = 32 * 1024;

const CR = 13;
const LF = 10;
// RFC 9110 tchar: ! # $ % & ' * + - . ^ _ ` | ~ DIGIT ALPHA
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// Field values: visible ASCII, obs-text, spaces and tabs; no controls.
const VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const STATUS_LINE = /^HTTP\/1\.[01] ([1-9][0-9]{2})(?: [\t\x20-\x7e\x80-\xff]*)?$/;

/**
 * The head in `bytes[0, end)`, or null when its blank line has not arrived yet. Refuses (with
 * HttpHeadError) a malformed head, or one past MAX_HEAD_BYTES.
 */
export function parseHttpHead(bytes: Uint8Array, end = bytes.length): HttpHead | null {
  const limit = Math.min(end, bytes.length);
  let blank = -1;
  for (let i = 3; i < limit; i++) {
    if (bytes[i] === LF && bytes[i - 1] === CR && bytes[i - 2] === LF && bytes[i - 3] === CR) {
      blank = i + 1;
      break;
    }
  }
  if (blank === -1) {
    if (limit > MAX_HEAD_BYTES) throw new HttpHeadError(`an answer's head passed ${MAX_HEAD_BYTES} bytes`);
    return null;
  }
  if (blank > MAX_HEAD_BYTES) throw new HttpHeadError(`an answer's head passed ${MAX_HEAD_BYTES} bytes`);
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, blank - 4).toString('latin1');
  const lines = text.split('\r\n');
  for (const line of lines)
    if (line.includes('\n') || line.includes('\r'))
      throw new HttpHeadError('a line of the head ends without CRLF');
  const statusMatch = STATUS_LINE.exec(lines[0]!);
  if (!statusMatch) throw new HttpHeadError('the answer does not start with an HTTP/1.x status line');
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  let contentLength: number | null = null;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new HttpHeadError('a header line has no field name');
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) throw new HttpHeadError('a header field name is not a token');
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, '');
    if (!VALUE.test(value)) throw new HttpHeadError('a header field value holds a control character');
    const lower = name.toLowerCase();
    if (lower === 'content-length') {
      if (!/^[0-9]{1,15}$/.test(value)) throw new HttpHeadError('the Content-Length is not a number');
      const length = Number(value);
      if (contentLength !== null && contentLength !== length)
        throw new HttpHeadError('the answer gives two different Content-Lengths');
      contentLength = length;
      headers[lower] = value;
      continue;
    }
    const before = headers[lower];
    headers[lower] = before === undefined ? value : `${before}, ${value}`;
  }
  return { status: Number(statusMatch[1]), headers: { ...headers }, contentLength, length: blank };
}
