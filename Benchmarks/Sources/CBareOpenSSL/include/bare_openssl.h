#ifndef SIWA_BENCH_BARE_OPENSSL_H
#define SIWA_BENCH_BARE_OPENSSL_H

// The ceiling for the benchmarks: the OpenSSL calls a JWS signature needs, with no parsing,
// no JSON and no Swift in between. Keys stay opaque so the Swift side touches no pointers.

#include <stddef.h>
#include <stdint.h>

typedef struct bare_key bare_key;

/// A key from PEM text (a private key in PKCS#8 or PKCS#1, or a SubjectPublicKeyInfo), or NULL.
bare_key *bare_key_from_pem(const char *pem, int is_private);
void bare_key_free(bare_key *key);

/// Verifies an RS256 (PKCS#1 v1.5, SHA-256) signature `iterations` times, each time with a fresh
/// EVP_MD_CTX, EVP_DigestVerifyInit and EVP_DigestVerify; returns how many were valid.
long bare_rs256_verify_times(const bare_key *key, const uint8_t *signature, size_t signature_length,
                             const uint8_t *message, size_t message_length, long iterations);

/// Signs `message` with SHA-256 `iterations` times (ECDSA P-256 gives DER); returns how many
/// succeeded. The last signature is copied to `out` (capacity `out_capacity`), its length to `out_length`.
long bare_sha256_sign_times(const bare_key *key, const uint8_t *message, size_t message_length,
                            long iterations, uint8_t *out, size_t out_capacity, size_t *out_length);

/// OpenSSL's version text, e.g. "OpenSSL 3.0.19 27 Jan 2026".
const char *bare_openssl_version(void);

#endif
