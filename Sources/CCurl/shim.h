#ifndef SIWA_CCURL_SHIM_H
#define SIWA_CCURL_SHIM_H
#include <curl/curl.h>

/*
 * Swift cannot call C variadic functions, so every curl_easy_setopt /
 * curl_multi_setopt / curl_easy_getinfo use goes through one of these typed
 * wrappers, one per argument type libcurl documents for the option.
 */

typedef size_t (*siwa_curl_data_callback)(char *ptr, size_t size, size_t nmemb, void *userdata);

static inline CURLcode siwa_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode siwa_curl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode siwa_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode siwa_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/* For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION (same signature). */
static inline CURLcode siwa_curl_easy_setopt_data_callback(CURL *handle, CURLoption option, siwa_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode siwa_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLMcode siwa_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

static inline CURLcode siwa_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode siwa_curl_easy_getinfo_double(CURL *handle, CURLINFO info, double *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode siwa_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/* For CURLINFO_PRIVATE (void *) and string infos (char *), read as an untyped pointer. */
static inline CURLcode siwa_curl_easy_getinfo_pointer(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode siwa_curl_easy_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    char *result = NULL;
    CURLcode code = curl_easy_getinfo(handle, info, &result);
    *value = result;
    return code;
}

#endif
