/**
 * TLS failure codes that say something about who is at fault, shared by `classify` (is a retry
 * worth it?) and the dial outcome rule (does the failure count against the host?).
 *
 * @module
 */

/**
 * Certificate and identity verdicts (OpenSSL's X509 verify codes as Node names them, and Node's
 * hostname check). Each is reached only after the peer presented its certificate: the host is up.
 */
export const CERT_CODES: ReadonlySet<string> = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CRL_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID',
  'CRL_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD',
  'ERROR_IN_CRL_NEXT_UPDATE_FIELD',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_TLS_CERT_ALTNAME_FORMAT',
]);

/**
 * The peer answered the ClientHello with something that is not TLS (a plain HTTP, Redis or
 * memcached server on the port): the client's `https:`/`tls` is wrong for this port, and every
 * retry gets the same answer. The host answered, so it is alive (see `dialFailureOutcome`).
 */
export const NOT_TLS_CODE = 'ERR_SSL_WRONG_VERSION_NUMBER';

/**
 * Alerts a peer sends when the two ends' configurations cannot agree (no common ALPN protocol,
 * TLS version or cipher; our certificate refused): the same handshake fails the same way again,
 * so retrying cannot help. A peer's `internal_error` alert is not here: that one may pass.
 * OpenSSL names a few alerts without `ALERT_`: `unrecognized_name` (the server knows no site by
 * the name sent, as nginx's `ssl_reject_handshake` answers: `ERR_SSL_TLSV1_UNRECOGNIZED_NAME`,
 * retried as a failed dial, 3 handshakes and ~1.5 s a call where plain clients failed at once;
 * an outside review), `unsupported_extension`, `certificate_unobtainable`,
 * `bad_certificate_status_response` and `bad_certificate_hash_value`.
 */
export const TLS_MISMATCH_ALERT =
  /(ALERT_(NO_APPLICATION_PROTOCOL|PROTOCOL_VERSION|HANDSHAKE_FAILURE|INSUFFICIENT_SECURITY|UNKNOWN_CA|BAD_CERTIFICATE|UNSUPPORTED_CERTIFICATE|CERTIFICATE_REQUIRED|CERTIFICATE_UNKNOWN|CERTIFICATE_EXPIRED|CERTIFICATE_REVOKED|ACCESS_DENIED|ILLEGAL_PARAMETER|UNRECOGNIZED_NAME)|TLSV1_(UNRECOGNIZED_NAME|UNSUPPORTED_EXTENSION|CERTIFICATE_UNOBTAINABLE|BAD_CERTIFICATE_STATUS_RESPONSE|BAD_CERTIFICATE_HASH_VALUE))$/;
