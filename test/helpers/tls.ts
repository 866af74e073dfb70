// A certificate made by the test run for a TLS server on loopback (a stand-in bucket on https), and
// this process's trust in it: Node's default CA list, which TLS connections and https agents (the
// AWS SDK's among them) use when given no `ca`, gets the certificate until `untrust` is called.

import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { tempDir } from './svc.ts';

/** A self-signed certificate for 127.0.0.1 and its key (PEM), made by openssl, valid a day. */
export function selfSignedCertificate(): { key: string; cert: string } {
  const dir = tempDir('svc-tls-');
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
      ].concat([
        '-subj',
        '/CN=svc-test',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        key,
        '-out',
        cert,
      ]),
      { stdio: 'ignore' },
    );
    return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Trusts `cert` in this process as a certificate authority; `untrust` restores the list before. */
export function trustCertificate(cert: string): { untrust: () => void } {
  const before = getCACertificates('default');
  setDefaultCACertificates([...before, cert]);
  return { untrust: () => setDefaultCACertificates(before) };
}
