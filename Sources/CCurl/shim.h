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

/*
 * The event loop of CurlHTTP (Linux): libcurl's socket interface driven by epoll.
 *
 * curl_multi_poll / curl_multi_perform look at every transfer on every wake-up, so with a thousand
 * transfers in flight each finished response cost a thousand polls. With the socket interface
 * libcurl tells us which sockets it waits on (siwa_curl_on_socket) and when its next timer is due
 * (siwa_curl_on_timer); epoll reports only the sockets that are ready, and
 * curl_multi_socket_action handles only those. It runs on the CurlHTTP thread, or on a thread that
 * submits a request while that thread waits (under CurlMultiLoop's driver lock, never two at once);
 * other threads write to wake_fd (an eventfd) to say "look at your queue".
 */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

typedef struct siwa_curl_events {
    /* The multi handle the callbacks serve (for curl_multi_assign). */
    CURLM *multi;
    int epoll_fd;
    int wake_fd;
    /* CLOCK_MONOTONIC milliseconds at which libcurl wants curl_multi_socket_action(CURL_SOCKET_TIMEOUT);
       -1 when it has no timer. */
    long long timer_deadline_ms;
    /* When the loop thread's current (or next) epoll_wait ends at the latest: a thread that drives libcurl
       meanwhile and moves its timer before this must wake the loop (siwa_curl_events_timer_before_wake). */
    long long wait_until_ms;
} siwa_curl_events;

static inline long long siwa_monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* CURLMOPT_SOCKETFUNCTION: keep epoll's interest in socket `s` equal to what libcurl asks for. A socket
   epoll watches carries a non-NULL `socketp` (curl_multi_assign), so the first call for it adds it and
   later calls change it: one epoll_ctl per change. libcurl forgets `socketp` when it says REMOVE, which
   it does each time a transfer ends and its connection goes back to the cache. */
static inline int siwa_curl_on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    (void)easy;
    siwa_curl_events *events = (siwa_curl_events *)userp;
    if (what == CURL_POLL_REMOVE) {
        /* Fails harmlessly when libcurl already closed the socket (the kernel dropped it then). */
        epoll_ctl(events->epoll_fd, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    struct epoll_event interest = {0};
    interest.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    interest.data.fd = s;
    int first = epoll_ctl(events->epoll_fd, socketp ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &interest);
    if (first != 0) {
        /* The other operation, should epoll and our mark disagree (a descriptor number reused). */
        if (errno != ENOENT && errno != EEXIST) return -1;
        if (epoll_ctl(events->epoll_fd, errno == ENOENT ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, s, &interest) != 0) return -1;
    }
    if (!socketp) curl_multi_assign(events->multi, s, events);
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: remember when libcurl wants to be called for its timeouts. */
static inline int siwa_curl_on_timer(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    siwa_curl_events *events = (siwa_curl_events *)userp;
    events->timer_deadline_ms = timeout_ms < 0 ? -1 : siwa_monotonic_ms() + timeout_ms;
    return 0;
}

/* Creates the epoll and wake-up descriptors and hands both callbacks to `multi`. 0 on success,
   otherwise an errno value (and nothing is left open). */
static inline int siwa_curl_events_open(CURLM *multi, siwa_curl_events *events) {
    events->multi = multi;
    events->timer_deadline_ms = -1;
    events->wait_until_ms = -1;
    events->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (events->epoll_fd < 0) return errno;
    events->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (events->wake_fd < 0) {
        int error = errno;
        close(events->epoll_fd);
        return error;
    }
    struct epoll_event interest = {0};
    interest.events = EPOLLIN;
    interest.data.fd = events->wake_fd;
    if (epoll_ctl(events->epoll_fd, EPOLL_CTL_ADD, events->wake_fd, &interest) != 0) {
        int error = errno;
        close(events->wake_fd);
        close(events->epoll_fd);
        return error;
    }
    curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, siwa_curl_on_socket);
    curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, (void *)events);
    curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, siwa_curl_on_timer);
    curl_multi_setopt(multi, CURLMOPT_TIMERDATA, (void *)events);
    return 0;
}

static inline void siwa_curl_events_close(siwa_curl_events *events) {
    close(events->wake_fd);
    close(events->epoll_fd);
}

/* SCHED_BATCH in Linux's ABI: <sched.h> names it only under _GNU_SOURCE, which Swift's Glibc lacks. */
#define SIWA_SCHED_BATCH 3

/* Puts thread `thread` (a kernel thread id of this process; 0: the calling thread) under SCHED_BATCH,
   its nice value unchanged: its wake-ups then never preempt the thread running on that core (it runs
   when a core is free or the running thread's turn ends). A process may ask this for its own threads
   without privileges. 0 on success, otherwise an errno value. */
static inline int siwa_thread_schedule_as_batch(pid_t thread) {
    struct sched_param param = {0};
    return sched_setscheduler(thread, SIWA_SCHED_BATCH, &param) == 0 ? 0 : errno;
}

/* Names the calling thread for the kernel (/proc/self/task/TID/comm, top -H, perf); at most 15 bytes
   are kept. 0 on success, otherwise an errno value. */
static inline int siwa_current_thread_set_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0) == 0 ? 0 : errno;
}

/* The calling thread's kernel id (its /proc/self/task entry); glibc's gettid() needs _GNU_SOURCE. */
static inline pid_t siwa_current_thread_id(void) {
    return (pid_t)syscall(SYS_gettid);
}

/* Any thread: makes a waiting siwa_curl_events_wait return. */
static inline void siwa_curl_events_wake(const siwa_curl_events *events) {
    uint64_t one = 1;
    ssize_t written = write(events->wake_fd, &one, sizeof one);
    (void)written; /* EAGAIN means the counter is already non-zero: a wake-up is pending anyway. */
}

/* Loop thread, while no other thread drives libcurl: how long its next wait may last (at most
   `max_ms`, less when libcurl's timer is due sooner), remembered in wait_until_ms. */
static inline int siwa_curl_events_plan_wait(siwa_curl_events *events, int max_ms) {
    long long now = siwa_monotonic_ms();
    long long timeout_ms = max_ms;
    if (events->timer_deadline_ms >= 0) {
        long long until_timer = events->timer_deadline_ms - now;
        if (until_timer < 0) until_timer = 0;
        if (until_timer < timeout_ms) timeout_ms = until_timer;
    }
    events->wait_until_ms = now + timeout_ms;
    return (int)timeout_ms;
}

/* A thread that drove libcurl while the loop thread waits: whether libcurl's timer now falls before the
   end of that wait, so the loop must be woken to meet it. */
static inline int siwa_curl_events_timer_before_wake(const siwa_curl_events *events) {
    return events->timer_deadline_ms >= 0 && events->timer_deadline_ms < events->wait_until_ms;
}

/* Waits at most `timeout_ms` (from siwa_curl_events_plan_wait) for ready sockets and writes up to
   `capacity` of them to `sockets` / `flags` (CURL_CSELECT_*). A wake-up is consumed, not reported.
   Returns the number written, or -1 with errno. */
static inline int siwa_curl_events_wait(siwa_curl_events *events, int *sockets, int *flags, int capacity, int timeout_ms) {
    enum { batch = 256 };
    struct epoll_event ready[batch];
    if (capacity > batch) capacity = batch;
    int count = epoll_wait(events->epoll_fd, ready, capacity, timeout_ms);
    if (count < 0) return errno == EINTR ? 0 : -1;
    int written = 0;
    for (int i = 0; i < count; i++) {
        if (ready[i].data.fd == events->wake_fd) {
            uint64_t value;
            ssize_t got = read(events->wake_fd, &value, sizeof value);
            (void)got;
            continue;
        }
        uint32_t e = ready[i].events;
        sockets[written] = ready[i].data.fd;
        flags[written] = ((e & (EPOLLIN | EPOLLHUP)) ? CURL_CSELECT_IN : 0)
            | ((e & EPOLLOUT) ? CURL_CSELECT_OUT : 0)
            | ((e & EPOLLERR) ? CURL_CSELECT_ERR : 0);
        written++;
    }
    return written;
}

/* True when libcurl's timer is due (and clears it: libcurl sets a new one while it runs). */
static inline int siwa_curl_events_take_due_timer(siwa_curl_events *events) {
    if (events->timer_deadline_ms < 0 || events->timer_deadline_ms > siwa_monotonic_ms()) return 0;
    events->timer_deadline_ms = -1;
    return 1;
}

static inline CURLMcode siwa_curl_multi_socket_action(CURLM *multi, int socket, int flags, int *running) {
    return curl_multi_socket_action(multi, (curl_socket_t)socket, flags, running);
}

static inline CURLMcode siwa_curl_multi_timeout_action(CURLM *multi, int *running) {
    return curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, running);
}

#endif
