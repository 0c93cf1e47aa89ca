/**
 * A second self-signed certificate (CN other-client, ECDSA P-256, valid until 2126) that nothing in
 * the tests trusts: a client presenting it to a server that requires certificates TEST_CERT signs
 * is refused after the handshake (Node's servers check a client certificate then, and hang up
 * with no alert under TLS 1.3). It protects nothing: the key is public, right here.
 */
export const OTHER_CERT = `-----BEGIN CERTIFICATE-----
MIIBhjCCASugAwIBAgIUCjAXfQuie+A6BWXx4K6+e+krV1wwCgYIKoZIzj0EAwIw
FzEVMBMGA1UEAwwMb3RoZXItY2xpZW50MCAXDTI2MTIwNTIzMzEzOVoYDzIxMjYx
MTExMjMzMTM5WjAXMRUwEwYDVQQDDAxvdGhlci1jbGllbnQwWTATBgcqhkjOPQIB
BggqhkjOPQMBBwNCAATKDM25zVsgcnDSxspc5mNQgbtrWO+ZaxTKQkFaBU37nrzg
kykmRaKcgbabf7Dzbd7Lr17YUTFsPKFlnHwY4FCmo1MwUTAdBgNVHQ4EFgQUV6+v
8UCXwkKaknE7RnnmcSL3wscwHwYDVR0jBBgwFoAUV6+v8UCXwkKaknE7RnnmcSL3
wscwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAyOKmrzl03ouJ
xSyyiu1HD8KWPxiuMKqSsknwiaaY8ZcCIQDN2ev1nDWewPHPujdDElx/T/VPzXlO
9ADLd2eC+HjrgQ==
-----END CERTIFICATE-----
`;

export const OTHER_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg0oMKeT/wYpa7uZcg
nxYhSs708yM2+SPOV5o6Ly9w6XShRANCAATKDM25zVsgcnDSxspc5mNQgbtrWO+Z
axTKQkFaBU37nrzgkykmRaKcgbabf7Dzbd7Lr17YUTFsPKFlnHwY4FCm
-----END PRIVATE KEY-----
`;
