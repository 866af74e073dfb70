// A tiny HTTP proxy in front of a real S3 server (MinIO) for the store tests (real parts,
// docs/architecture.md). Three uses:
//
// - a nonconforming bucket: `stripHeaders` drops request headers such as If-Match and
//   If-None-Match, as some proxies and S3-compatible servers silently do. SigV4 signs
//   those headers, so a stripped request would fail its signature check; a stripping
//   proxy therefore also drops the signature (`anonymous`) and the test opens the bucket
//   to anonymous access (`allowAnonymous`), so that MinIO judges only what arrives.
// - faults: `fault` decides per request to refuse it (503, or 409 ConditionalRequestConflict)
//   without forwarding it, or to forward it and then lose the answer (the connection is cut after MinIO answered),
//   the ambiguous outcome the S3 store settles by reading back its write nonce.
// - watching: `answered` is told once a forwarded request's answer was handed back, so a test can
//   act right after a given write landed (freeze MinIO the moment the selector moved).

import { createServer, type IncomingHttpHeaders, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PutBucketPolicyCommand, S3Client } from '@aws-sdk/client-s3';
import type { Minio } from './minio.ts';

/**
 * What to do with one request: forward it (undefined); answer 503 SlowDown or 409
 * ConditionalRequestConflict without forwarding it; or forward it and lose the answer.
 */
export type Fault = 'refuse' | 'conflict' | 'lose-answer' | undefined;

export interface ProxiedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
}

export interface S3ProxyOptions {
  /** Request headers dropped before forwarding (lower case). */
  stripHeaders?: string[];
  /** Drop the SigV4 signature too (needed whenever a signed header is stripped). */
  anonymous?: boolean;
  fault?: (request: ProxiedRequest) => Fault;
  /** Told once MinIO's whole answer to a forwarded request has been handed to the client. */
  answered?: (request: ProxiedRequest, status: number) => void;
}

export interface S3Proxy {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  /** Every request that reached the proxy, in order, as it arrived. */
  seen: ProxiedRequest[];
  close(): Promise<void>;
}

// Headers that carry the SigV4 signature; without them MinIO treats a request as anonymous.
const SIGNATURE_HEADERS = ['authorization', 'x-amz-date', 'x-amz-security-token'];

/** Starts the proxy on a free loopback port in front of `target` (an http:// endpoint). */
export async function startS3Proxy(target: string, options: S3ProxyOptions = {}): Promise<S3Proxy> {
  const upstream = new URL(target);
  const strip = new Set([
    ...(options.stripHeaders ?? []).map((h) => h.toLowerCase()),
    ...(options.anonymous ? SIGNATURE_HEADERS : []),
  ]);
  const seen: ProxiedRequest[] = [];
  const server = createServer((req, res) => {
    const incoming: ProxiedRequest = {
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: req.headers,
    };
    seen.push(incoming);
    const fault = options.fault?.(incoming);
    if (fault === 'refuse' || fault === 'conflict') {
      req.resume();
      const [status, code] = fault === 'refuse' ? [503, 'SlowDown'] : [409, 'ConditionalRequestConflict'];
      res.writeHead(status, { 'content-type': 'application/xml', connection: 'close' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>injected by the test proxy</Message></Error>`,
      );
      return;
    }
    const headers: IncomingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (!strip.has(name)) headers[name] = value;
    }
    // Host stays as the client sent it: SigV4 signs it, and MinIO checks what it receives.
    const forward = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
      (answer) => {
        if (fault === 'lose-answer') {
          // MinIO has acted on the request; the client never learns how.
          answer.resume();
          answer.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (options.answered) res.once('finish', () => options.answered!(incoming, answer.statusCode ?? 502));
        answer.pipe(res);
      },
    );
    forward.on('error', () => req.socket.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolveListen) => server.listen(0, '127.0.0.1', resolveListen));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolveClose) => {
        server.closeAllConnections();
        server.close(() => resolveClose());
      }),
  };
}

/** Lets anonymous requests read, write, delete and list one MinIO bucket. */
export async function allowAnonymous(minio: Minio, bucket: string): Promise<void> {
  const client = new S3Client({
    endpoint: minio.endpoint,
    region: minio.region,
    forcePathStyle: true,
    credentials: { accessKeyId: minio.accessKey, secretAccessKey: minio.secretKey },
  });
  try {
    const policy = {
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Principal: { AWS: ['*'] },
          Action: ['s3:GetObject', 's3:PutObject', 's3:DeleteObject'],
          Resource: [`arn:aws:s3:::${bucket}/*`],
        },
        {
          Effect: 'Allow',
          Principal: { AWS: ['*'] },
          Action: ['s3:ListBucket', 's3:GetBucketLocation'],
          Resource: [`arn:aws:s3:::${bucket}`],
        },
      ],
    };
    await client.send(new PutBucketPolicyCommand({ Bucket: bucket, Policy: JSON.stringify(policy) }));
  } finally {
    client.destroy();
  }
}
