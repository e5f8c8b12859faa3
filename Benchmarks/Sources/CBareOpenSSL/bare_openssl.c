#include "bare_openssl.h"

#include <string.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

struct bare_key {
    EVP_PKEY *pkey;
};

bare_key *bare_key_from_pem(const char *pem, int is_private) {
    BIO *bio = BIO_new_mem_buf(pem, -1);
    if (bio == NULL) return NULL;
    EVP_PKEY *pkey = is_private ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)
                                : PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
    BIO_free(bio);
    if (pkey == NULL) return NULL;
    bare_key *key = OPENSSL_malloc(sizeof(bare_key));
    if (key == NULL) {
        EVP_PKEY_free(pkey);
        return NULL;
    }
    key->pkey = pkey;
    return key;
}

void bare_key_free(bare_key *key) {
    if (key == NULL) return;
    EVP_PKEY_free(key->pkey);
    OPENSSL_free(key);
}

long bare_rs256_verify_times(const bare_key *key, const uint8_t *signature, size_t signature_length,
                             const uint8_t *message, size_t message_length, long iterations) {
    long valid = 0;
    for (long i = 0; i < iterations; i++) {
        // A fresh context each time, as a verifier of independent tokens needs.
        EVP_MD_CTX *context = EVP_MD_CTX_new();
        if (context == NULL) break;
        if (EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, key->pkey) == 1
            && EVP_DigestVerify(context, signature, signature_length, message, message_length) == 1) {
            valid++;
        } else {
            ERR_clear_error();
        }
        EVP_MD_CTX_free(context);
    }
    return valid;
}

long bare_sha256_sign_times(const bare_key *key, const uint8_t *message, size_t message_length,
                            long iterations, uint8_t *out, size_t out_capacity, size_t *out_length) {
    long signed_count = 0;
    unsigned char signature[1024];
    *out_length = 0;
    for (long i = 0; i < iterations; i++) {
        EVP_MD_CTX *context = EVP_MD_CTX_new();
        if (context == NULL) break;
        size_t length = sizeof(signature);
        if (EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key->pkey) == 1
            && EVP_DigestSign(context, signature, &length, message, message_length) == 1) {
            signed_count++;
            if (length <= out_capacity) {
                memcpy(out, signature, length);
                *out_length = length;
            }
        } else {
            ERR_clear_error();
        }
        EVP_MD_CTX_free(context);
    }
    return signed_count;
}

const char *bare_openssl_version(void) {
    return OpenSSL_version(OPENSSL_VERSION);
}
