#ifndef SIWA_CSQLITE3_SHIM_H
#define SIWA_CSQLITE3_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import: SQLite copies
   the bytes before the call returns, so the caller's buffer may go away right after. */
static inline int siwa_sqlite3_bind_text_copy(sqlite3_stmt *statement, int index, const char *text, int length) {
    return sqlite3_bind_text(statement, index, text, length, SQLITE_TRANSIENT);
}

static inline int siwa_sqlite3_bind_blob_copy(sqlite3_stmt *statement, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(statement, index, bytes, length, SQLITE_TRANSIENT);
}
/* sqlite3_config is variadic, which Swift cannot call. Turns off SQLite's memory statistics: with them
   on (Debian's build does not set SQLITE_DEFAULT_MEMSTATUS=0), every allocation and free inside SQLite
   takes a process-wide mutex to count bytes that nobody reads. Only allowed before SQLite initializes;
   afterwards SQLite answers SQLITE_MISUSE and changes nothing. */
static inline int siwa_sqlite3_disable_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
