// TLS: a private CA made with openssl, redis-server with --tls-port, the library and the CLI over rediss://.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { LockClient, RedisCommandError } from '../src';
import { freePort, RedisServer } from '../scripts/redisServer';
import { runCli } from './helpers/cliInProcess';
import { until } from './helpers/time';

const dir = mkdtempSync(join(tmpdir(), 'rlock-tls-'));
const file = (name: string): string => join(dir, name);
const pem = (name: string): string => readFileSync(file(name), 'utf8');

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

/** A CA, and certificates it signs: EC keys, one day, the server's valid for 127.0.0.1. */
function makeCertificates(): void {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const ca of ['ca', 'wrong-ca']) openssl('req', '-x509', ...ec, '-keyout', `${ca}.key`, '-out', `${ca}.crt`, '-days', '1', '-subj', `/CN=rlock test ${ca}`);
  writeFileSync(file('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  writeFileSync(file('client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const who of ['server', 'client']) {
    openssl('req', ...ec, '-keyout', `${who}.key`, '-out', `${who}.csr`, '-subj', `/CN=rlock test ${who}`);
    openssl('x509', '-req', '-in', `${who}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${who}.crt`, '-days', '1', '-extfile', `${who}.ext`);
  }
}

let tlsPort = 0;
let mtlsPort = 0;
const servers: RedisServer[] = [];
const clients: LockClient[] = [];

beforeAll(async () => {
  makeCertificates();
  const tlsArgs = (port: number, authClients: string): string[] => [
    '--tls-port', String(port), '--tls-cert-file', file('server.crt'), '--tls-key-file', file('server.key'),
    '--tls-ca-cert-file', file('ca.crt'), '--tls-auth-clients', authClients,
  ];
  tlsPort = await freePort();
  servers.push(await RedisServer.start(tlsArgs(tlsPort, 'no')));
  mtlsPort = await freePort();
  servers.push(await RedisServer.start(tlsArgs(mtlsPort, 'yes')));
}, 30_000);

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
});

afterAll(async () => {
  await Promise.all(servers.map((server) => server.stop()));
  rmSync(dir, { recursive: true, force: true });
});

function track(client: LockClient): LockClient {
  clients.push(client);
  return client;
}

/** A lock taken, a waiter parked on its channel (the subscriber connects over TLS too), woken by the release. */
async function lockWaitAndWake(client: LockClient): Promise<void> {
  const holder = client.getLock('tls');
  await holder.lock();
  const waiter = client.getLock('tls');
  const waiting = waiter.tryLock({ waitTime: 20_000, leaseTime: 5000 });
  await until('the waiter parked', () => client.stats.waiters === 1);
  await holder.unlock();
  expect(await waiting).toBe(true);
  await waiter.unlock();
}

test('rediss:// with a private CA (tls: { ca }), as a connection passed in and as options', async () => {
  const connection = new Redis(`rediss://127.0.0.1:${tlsPort}`, { tls: { ca: pem('ca.crt') }, enableReadyCheck: false });
  try {
    await lockWaitAndWake(track(new LockClient({ redis: connection })));
  } finally {
    connection.disconnect();
  }
  await lockWaitAndWake(track(new LockClient({ redis: { host: '127.0.0.1', port: tlsPort, tls: { ca: pem('ca.crt') } } })));
});

test('mutual TLS: the server refuses a client without a certificate and accepts one the CA signed', async () => {
  const withCert = track(new LockClient({ redis: { host: '127.0.0.1', port: mtlsPort, tls: { ca: pem('ca.crt'), cert: pem('client.crt'), key: pem('client.key') } } }));
  await lockWaitAndWake(withCert);
  // TLS 1.2: under TLS 1.3 the server refuses a missing client certificate only after the client
  // has finished its handshake, so whether the refusal comes before or after the connection
  // counts as ready is a race (it failed a clean-clone CI run now and then); 1.2 refuses it
  // inside the handshake.
  const without = track(new LockClient({ redis: { host: '127.0.0.1', port: mtlsPort, tls: { ca: pem('ca.crt'), maxVersion: 'TLSv1.2' }, maxRetriesPerRequest: 0 } }));
  const error = await without.getLock('tls').tryLock().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RedisCommandError);
  expect((error as Error).message).toMatch(/^acquire: cannot reach Redis at .*: .*(certificate|alert|ECONNRESET)/i); // Redis 7.0 resets the connection: ECONNRESET
});

test('a server certificate from another CA fails with an error naming the cause', async () => {
  const client = track(new LockClient({ redis: { host: '127.0.0.1', port: tlsPort, tls: { ca: pem('wrong-ca.crt') }, maxRetriesPerRequest: 0 } }));
  const error = await client.getLock('tls').tryLock().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RedisCommandError);
  // Node names it "unable to verify the first certificate" or "self-signed certificate in certificate chain".
  expect((error as Error).message).toMatch(/^acquire: cannot reach Redis at .*: .*certificate.* \([A-Z_]+\)$/);
});

test('the CLI over TLS: --tls-ca (or REDIS_TLS_CA), a client certificate, and a wrong CA named in one line', async () => {
  const ok = await runCli(['--url', `rediss://127.0.0.1:${tlsPort}`, '--tls-ca', file('ca.crt'), '--json', 'inspect', 'x']);
  expect(ok).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(ok.stdout)).toMatchObject({ name: 'x', locked: false });
  const fromEnv = await runCli(['inspect', 'x'], { REDIS_URL: `rediss://127.0.0.1:${mtlsPort}`, REDIS_TLS_CA: file('ca.crt'), REDIS_TLS_CERT: file('client.crt'), REDIS_TLS_KEY: file('client.key') });
  expect(fromEnv).toMatchObject({ code: 0, stderr: '' });
  const mutual = await runCli(['--url', `rediss://127.0.0.1:${mtlsPort}`, '--tls-ca', file('ca.crt'), '--tls-cert', file('client.crt'), '--tls-key', file('client.key'), 'list']);
  expect(mutual).toEqual({ code: 0, stdout: '', stderr: '' });
  const wrong = await runCli(['--url', `rediss://127.0.0.1:${tlsPort}`, '--tls-ca', file('wrong-ca.crt'), 'inspect', 'x']);
  expect(wrong.code).toBe(3);
  expect(wrong.stderr).toMatch(new RegExp(`^rlock: cannot reach Redis at 127\\.0\\.0\\.1:${tlsPort}: .*certificate.*\\n$`));
  const half = await runCli(['--url', `rediss://127.0.0.1:${mtlsPort}`, '--tls-cert', file('client.crt'), 'list']);
  expect(half).toEqual({ code: 2, stdout: '', stderr: 'rlock: --tls-cert and --tls-key go together (a client certificate and its key)\n' });
  const plain = await runCli(['--url', `redis://127.0.0.1:${tlsPort}`, '--tls-ca', file('ca.crt'), 'list']);
  expect(plain).toEqual({ code: 2, stdout: '', stderr: 'rlock: --tls-* options need a rediss:// URL\n' });
});
