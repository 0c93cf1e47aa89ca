/**
 * A self-signed certificate for the fault peers' TLS listeners: CN and SAN localhost, 127.0.0.1
 * and ::1, ECDSA P-256, valid until 2126. It protects nothing (the key is public, right here):
 * it exists so tests can exercise real TLS handshakes on loopback without generating keys.
 *
 * @module
 */

/** PEM certificate; pass it as `ca` to trust the peers. */
export const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBrjCCAVSgAwIBAgIUOekS43OMK34Y1tDlGKeAfh9w4sQwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyOTE4MzYxMVoYDzIxMjYxMTA1
MTgzNjExWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAS1GNxzkvokPt2AHLY+Wa+wubsGgjw5MNh0m6bQXKzw+VES9CCggWps
nJNn+0N49mm7F/AItq3UAIgPsBGA1eUyo4GBMH8wHQYDVR0OBBYEFBtpSgxdXbPh
WvW6j/n13JDRTCBmMB8GA1UdIwQYMBaAFBtpSgxdXbPhWvW6j/n13JDRTCBmMA8G
A1UdEwEB/wQFMAMBAf8wLAYDVR0RBCUwI4IJbG9jYWxob3N0hwR/AAABhxAAAAAA
AAAAAAAAAAAAAAABMAoGCCqGSM49BAMCA0gAMEUCIAaGoVFReLjMfyf5RJwfXKoa
5PJqvUQ20AlsSNyesazxAiEAxvFDmu9Bo9JhWVZmgS4SfgnoSN1wIhnU/azFVAjM
HLg=
-----END CERTIFICATE-----
`;

/** PEM private key of {@link TEST_CERT}. */
export const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQghRxxXTYW/OGbouDi
B02VvDeaohZrSzNfKGTv9L/AG62hRANCAAS1GNxzkvokPt2AHLY+Wa+wubsGgjw5
MNh0m6bQXKzw+VES9CCggWpsnJNn+0N49mm7F/AItq3UAIgPsBGA1eUy
-----END PRIVATE KEY-----
`;
