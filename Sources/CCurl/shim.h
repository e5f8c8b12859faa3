#ifndef SIWA_CCURL_SHIM_H
#define SIWA_CCURL_SHIM_H
#include <curl/curl.h>
#endif
