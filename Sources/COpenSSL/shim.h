#ifndef SIWA_COPENSSL_SHIM_H
#define SIWA_COPENSSL_SHIM_H
#include <openssl/evp.h>
#endif
