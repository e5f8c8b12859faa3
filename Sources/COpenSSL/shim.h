#ifndef SIWA_COPENSSL_SHIM_H
#define SIWA_COPENSSL_SHIM_H

// OpenSSL 3 headers used by the JOSE target. Swift cannot call C function-like macros
// or variadic functions, so the few we need get small static inline wrappers below.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

/// EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *siwa_generate_p256_key(void) {
    return EVP_EC_gen("P-256");
}

/// EVP_RSA_gen is a macro over the variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *siwa_generate_rsa_key(unsigned int bits) {
    return EVP_RSA_gen(bits);
}

/// A password callback that always refuses: without it OpenSSL's default callback would
/// prompt on the controlling terminal when handed an encrypted PEM, hanging a server.
static inline int siwa_refuse_password(char *buf, int size, int rwflag, void *userdata) {
    (void)buf; (void)size; (void)rwflag; (void)userdata;
    return -1;
}

/// Reads the first private key in a PEM BIO (PKCS#8, SEC1 "EC PRIVATE KEY" or PKCS#1
/// "RSA PRIVATE KEY"); encrypted keys fail instead of prompting.
static inline EVP_PKEY *siwa_pem_read_private_key(BIO *bio) {
    return PEM_read_bio_PrivateKey(bio, NULL, siwa_refuse_password, NULL);
}

/// Reads the first SubjectPublicKeyInfo ("BEGIN PUBLIC KEY") in a PEM BIO.
static inline EVP_PKEY *siwa_pem_read_public_key(BIO *bio) {
    return PEM_read_bio_PUBKEY(bio, NULL, siwa_refuse_password, NULL);
}

/// BIO_get_mem_data is a macro over BIO_ctrl.
static inline long siwa_bio_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

/// OPENSSL_free is a macro that records the call site.
static inline void siwa_openssl_free(void *pointer) {
    OPENSSL_free(pointer);
}

/// EVP_PKEY_PUBLIC_KEY is a macro expression Swift does not import.
static inline int siwa_selection_public_key(void) {
    return EVP_PKEY_PUBLIC_KEY;
}

/// Parameter and key-type names with static storage. OSSL_PARAM_BLD_push_* and
/// EVP_PKEY_CTX_new_from_name keep the name pointer rather than copying it, so a
/// temporary C string bridged from a Swift String would dangle.
static inline const char *siwa_name_group(void) { return OSSL_PKEY_PARAM_GROUP_NAME; }
static inline const char *siwa_name_public_key(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
static inline const char *siwa_name_rsa_n(void) { return OSSL_PKEY_PARAM_RSA_N; }
static inline const char *siwa_name_rsa_e(void) { return OSSL_PKEY_PARAM_RSA_E; }
static inline const char *siwa_name_key_type_ec(void) { return "EC"; }
static inline const char *siwa_name_key_type_rsa(void) { return "RSA"; }

/// An HMAC-SHA-256 context keyed once, to be copied for each message (EVP_MAC_CTX_dup) and
/// never used itself: EVP_Q_mac fetches "HMAC" and "SHA256" by name under OpenSSL's global lock
/// and keys a new context on every call. NULL if OpenSSL refuses. The caller frees it with
/// EVP_MAC_CTX_free.
static inline EVP_MAC_CTX *siwa_hmac_sha256_keyed(const unsigned char *key, size_t key_length) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL) return NULL;
    EVP_MAC_CTX *context = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac); /* the context holds its own reference */
    if (context == NULL) return NULL;
    /* OpenSSL reads the digest's name during EVP_MAC_init only: a string literal is enough. */
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    /* An empty key is a valid HMAC key; OpenSSL wants a pointer all the same (the Swift side's
       OpenSSL.withBytes passes one for an empty array). */
    if (EVP_MAC_init(context, key, key_length, params) != 1) {
        EVP_MAC_CTX_free(context);
        return NULL;
    }
    return context;
}

/// GCM control codes are macro aliases; exposed as functions so Swift sees plain ints.
static inline int siwa_ctrl_gcm_set_ivlen(void) { return EVP_CTRL_GCM_SET_IVLEN; }
static inline int siwa_ctrl_gcm_get_tag(void) { return EVP_CTRL_GCM_GET_TAG; }
static inline int siwa_ctrl_gcm_set_tag(void) { return EVP_CTRL_GCM_SET_TAG; }

#endif
