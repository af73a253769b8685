/*
 * wt_shim.c: WiredTiger's API as plain C functions, for src/wiredtiger.rs.
 *
 * WiredTiger's methods are function pointers inside its handle structs (cursor->search(cursor))
 * and the key/value setters are varargs; Rust should not copy those struct layouts. These
 * functions take the handles as opaque pointers and keys/values as (pointer, length), stored
 * as WT_ITEMs in a table with key_format=u,value_format=u (raw bytes).
 *
 * Threads: a WT_SESSION and its cursors are used by one thread at a time (the Rust side pools
 * them); the connection is shared. Every function returns WiredTiger's int result (0 is
 * success); the messages WiredTiger reports while a shim function runs on this thread are kept
 * in a thread-local buffer, read with fwt_last_message().
 *
 * Cursors come back reset (holding no page and no snapshot), except after fwt_get() and
 * fwt_seek()/fwt_next() returned 0: then the caller reads the item, and calls fwt_reset().
 */

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <wiredtiger.h>

_Static_assert(WIREDTIGER_VERSION_MAJOR == 3, "written against WiredTiger 3.x");

/* A write that meets another transaction's uncommitted update gets WT_ROLLBACK; an auto-commit
 * put or remove is retried this many times (yielding in between) before giving up. */
#define FWT_ROLLBACK_RETRIES 10000
/* A batch is retried as often, sleeping 100 us between attempts after the first hundred (a
 * concurrent batch that holds a key it writes may take a while to commit; a test with four
 * threads batching onto one shared key failed after 100 quick retries). A rollback because a
 * transaction's updates do not fit in the cache is not cured by retrying: it fails after the
 * last attempt, about a second later. */
#define FWT_BATCH_ROLLBACK_RETRIES 10000
#define FWT_BATCH_QUICK_RETRIES 100

/* One (key, value) of a batch; the Rust side has the same #[repr(C)] struct. */
typedef struct {
	const void *key;
	size_t key_len;
	const void *value;
	size_t value_len;
} fwt_entry;
_Static_assert(sizeof(fwt_entry) == 4 * sizeof(void *), "fwt_entry layout (src/sys/wiredtiger.rs)");

/* ---------------------------------------------------------------------------------------------
 * Error messages. WiredTiger reports the detail of an error (which file, which config key)
 * through the event handler, not in the return code. While a shim function runs, messages are
 * appended to this thread's buffer; outside one (WiredTiger's own threads: eviction, log,
 * checkpoint) they go to stderr as WiredTiger's default handler would.
 */
static __thread int fwt_in_call;
static __thread char fwt_message[2048];

static void
fwt_enter(void)
{
	fwt_in_call = 1;
	fwt_message[0] = '\0';
}

static int
fwt_leave(int ret)
{
	fwt_in_call = 0;
	return ret;
}

static int
fwt_handle_error(WT_EVENT_HANDLER *handler, WT_SESSION *session, int error, const char *message)
{
	size_t used;

	(void)handler;
	(void)session;
	(void)error;
	/* Drop the "[seconds:micros][pid:thread], " prefix: noise in an error value. */
	while (message[0] == '[' && strchr(message, ']') != NULL)
		message = strchr(message, ']') + 1;
	if (message[0] == ',' && message[1] == ' ')
		message += 2;
	if (!fwt_in_call) {
		fprintf(stderr, "wiredtiger: %s\n", message);
		return 0;
	}
	used = strlen(fwt_message);
	if (used > 0 && used + 2 < sizeof(fwt_message)) {
		memcpy(fwt_message + used, "; ", 3);
		used += 2;
	}
	if (used + 1 < sizeof(fwt_message))
		snprintf(fwt_message + used, sizeof(fwt_message) - used, "%s", message);
	return 0; /* handled: WiredTiger does not print it again */
}

static WT_EVENT_HANDLER fwt_event_handler = {
	fwt_handle_error, /* handle_error */
	NULL,             /* handle_message: WiredTiger's default (stdout) */
	NULL,             /* handle_progress */
	NULL,             /* handle_close */
};

/* The messages WiredTiger reported during this thread's last shim call ("" if none). */
const char *
fwt_last_message(void)
{
	return fwt_message;
}

/* The library's version string (not the header's: they could differ). */
const char *
fwt_version(void)
{
	return wiredtiger_version(NULL, NULL, NULL);
}

/* WiredTiger's text for a return code. */
const char *
fwt_strerror(int error)
{
	return wiredtiger_strerror(error);
}

static void
fwt_item(WT_ITEM *item, const void *data, size_t len)
{
	memset(item, 0, sizeof(*item));
	item->data = data;
	item->size = len;
}

/* ---------------------------------------------------------------------------------------------
 * Connection.
 */

/* Opens (creating as the config says) the database in `home` and creates the table `uri` if it
 * is missing. On failure *connp is NULL. */
int
fwt_open(const char *home, const char *config, const char *uri, const char *table_config,
    WT_CONNECTION **connp)
{
	WT_CONNECTION *conn = NULL;
	WT_SESSION *session = NULL;
	int ret, tret;

	fwt_enter();
	*connp = NULL;
	ret = wiredtiger_open(home, &fwt_event_handler, config, &conn);
	if (ret == 0)
		ret = conn->open_session(conn, NULL, NULL, &session);
	if (ret == 0)
		ret = session->create(session, uri, table_config);
	if (session != NULL && (tret = session->close(session, NULL)) != 0 && ret == 0)
		ret = tret;
	if (ret != 0 && conn != NULL) {
		(void)conn->close(conn, NULL);
		conn = NULL;
	}
	*connp = conn;
	return fwt_leave(ret);
}

/* Closes the connection and every session and cursor opened on it; without logging this also
 * writes a final checkpoint. */
int
fwt_close(WT_CONNECTION *conn)
{
	fwt_enter();
	return fwt_leave(conn->close(conn, NULL));
}

/* ---------------------------------------------------------------------------------------------
 * Sessions: one per pooled handle, with two cursors on the table: `rw` overwrites on insert
 * (put, get, scan), `del` does not (so remove reports WT_NOTFOUND for a missing key).
 */

int
fwt_session_open(WT_CONNECTION *conn, const char *uri, WT_SESSION **sessionp, WT_CURSOR **rwp,
    WT_CURSOR **delp)
{
	WT_SESSION *session = NULL;
	int ret;

	fwt_enter();
	*sessionp = NULL;
	*rwp = *delp = NULL;
	ret = conn->open_session(conn, NULL, "isolation=snapshot", &session);
	if (ret == 0)
		ret = session->open_cursor(session, uri, NULL, "overwrite=true", rwp);
	if (ret == 0)
		ret = session->open_cursor(session, uri, NULL, "overwrite=false", delp);
	if (ret != 0 && session != NULL) {
		(void)session->close(session, NULL); /* closes its cursors too */
		*rwp = *delp = NULL;
		session = NULL;
	}
	*sessionp = session;
	return fwt_leave(ret);
}

/* Writes a checkpoint: everything committed so far is in the data files. */
int
fwt_checkpoint(WT_SESSION *session)
{
	fwt_enter();
	return fwt_leave(session->checkpoint(session, NULL));
}

/* ---------------------------------------------------------------------------------------------
 * Point operations.
 */

/* 0: found, value and value_len point into WiredTiger's memory until fwt_reset(cursor).
 * WT_NOTFOUND: missing (cursor already reset). */
int
fwt_get(WT_CURSOR *cursor, const void *key, size_t key_len, const void **value,
    size_t *value_len)
{
	WT_ITEM k, v;
	int ret;

	fwt_enter();
	fwt_item(&k, key, key_len);
	cursor->set_key(cursor, &k);
	ret = cursor->search(cursor);
	if (ret == 0)
		ret = cursor->get_value(cursor, &v);
	if (ret == 0) {
		*value = v.data;
		*value_len = v.size;
	} else
		(void)cursor->reset(cursor);
	return fwt_leave(ret);
}

/* Inserts or overwrites (auto-commit: one transaction, synced as the connection's
 * transaction_sync says). */
int
fwt_put(WT_CURSOR *cursor, const void *key, size_t key_len, const void *value, size_t value_len)
{
	WT_ITEM k, v;
	int attempt, ret;

	fwt_enter();
	fwt_item(&k, key, key_len);
	fwt_item(&v, value, value_len);
	for (attempt = 0;; ++attempt) {
		cursor->set_key(cursor, &k);
		cursor->set_value(cursor, &v);
		ret = cursor->insert(cursor);
		(void)cursor->reset(cursor);
		if (ret != WT_ROLLBACK || attempt == FWT_ROLLBACK_RETRIES)
			break;
		fwt_message[0] = '\0'; /* a conflict we retry is not the caller's error */
		sched_yield();
	}
	return fwt_leave(ret);
}

/* 0: removed; WT_NOTFOUND: there was no such key. `cursor` is the session's overwrite=false
 * cursor. */
int
fwt_remove(WT_CURSOR *cursor, const void *key, size_t key_len)
{
	WT_ITEM k;
	int attempt, ret;

	fwt_enter();
	fwt_item(&k, key, key_len);
	for (attempt = 0;; ++attempt) {
		cursor->set_key(cursor, &k);
		ret = cursor->remove(cursor);
		(void)cursor->reset(cursor);
		if (ret != WT_ROLLBACK || attempt == FWT_ROLLBACK_RETRIES)
			break;
		fwt_message[0] = '\0'; /* a conflict we retry is not the caller's error */
		sched_yield();
	}
	return fwt_leave(ret);
}

/* Inserts or overwrites every entry in one transaction (all or none). */
int
fwt_put_batch(WT_SESSION *session, WT_CURSOR *cursor, const fwt_entry *entries, size_t count)
{
	WT_ITEM k, v;
	size_t i;
	int attempt, ret;

	fwt_enter();
	for (attempt = 0;; ++attempt) {
		if ((ret = session->begin_transaction(session, NULL)) != 0)
			break;
		for (i = 0; i < count && ret == 0; ++i) {
			fwt_item(&k, entries[i].key, entries[i].key_len);
			fwt_item(&v, entries[i].value, entries[i].value_len);
			cursor->set_key(cursor, &k);
			cursor->set_value(cursor, &v);
			ret = cursor->insert(cursor);
		}
		(void)cursor->reset(cursor);
		if (ret == 0)
			ret = session->commit_transaction(session, NULL); /* rolls back on failure */
		else
			(void)session->rollback_transaction(session, NULL);
		if (ret != WT_ROLLBACK || attempt == FWT_BATCH_ROLLBACK_RETRIES)
			break;
		fwt_message[0] = '\0'; /* a conflict we retry is not the caller's error */
		if (attempt < FWT_BATCH_QUICK_RETRIES)
			sched_yield();
		else
			usleep(100);
	}
	return fwt_leave(ret);
}

/* ---------------------------------------------------------------------------------------------
 * Scans: fwt_seek, then fwt_current / fwt_next while they return 0, then fwt_reset.
 */

/* Positions the cursor on the first key >= `key` (the first key if key_len is 0).
 * WT_NOTFOUND: there is none (cursor already reset). */
int
fwt_seek(WT_CURSOR *cursor, const void *key, size_t key_len)
{
	WT_ITEM k;
	int exact, ret;

	fwt_enter();
	if (key_len == 0)
		ret = cursor->next(cursor);
	else {
		fwt_item(&k, key, key_len);
		cursor->set_key(cursor, &k);
		ret = cursor->search_near(cursor, &exact);
		if (ret == 0 && exact < 0)
			ret = cursor->next(cursor);
	}
	if (ret != 0)
		(void)cursor->reset(cursor);
	return fwt_leave(ret);
}

/* Moves to the next key; WT_NOTFOUND past the last (cursor already reset). */
int
fwt_next(WT_CURSOR *cursor)
{
	int ret;

	fwt_enter();
	ret = cursor->next(cursor);
	if (ret != 0)
		(void)cursor->reset(cursor);
	return fwt_leave(ret);
}

/* The positioned entry; the pointers are valid until the next operation on the cursor. */
int
fwt_current(WT_CURSOR *cursor, const void **key, size_t *key_len, const void **value,
    size_t *value_len)
{
	WT_ITEM k, v;
	int ret;

	fwt_enter();
	ret = cursor->get_key(cursor, &k);
	if (ret == 0)
		ret = cursor->get_value(cursor, &v);
	if (ret == 0) {
		*key = k.data;
		*key_len = k.size;
		*value = v.data;
		*value_len = v.size;
	}
	return fwt_leave(ret);
}

/* Releases the cursor's position (its page and snapshot). */
int
fwt_reset(WT_CURSOR *cursor)
{
	fwt_enter();
	return fwt_leave(cursor->reset(cursor));
}

/* ---------------------------------------------------------------------------------------------
 * Explicit transactions: fwt_begin, then the fwt_txn_* operations (and fwt_get, fwt_seek,
 * fwt_seek_before, fwt_next, fwt_prev on the session's cursors), then fwt_commit or
 * fwt_rollback. Inside one, a WT_ROLLBACK is never retried: the transaction met another one's
 * update and must be rolled back whole.
 */

/* Begins a transaction on `session` (`config`: e.g. "isolation=snapshot"). */
int
fwt_begin(WT_SESSION *session, const char *config)
{
	fwt_enter();
	return fwt_leave(session->begin_transaction(session, config));
}

/* Commits the session's transaction; on failure WiredTiger rolls it back. */
int
fwt_commit(WT_SESSION *session)
{
	fwt_enter();
	return fwt_leave(session->commit_transaction(session, NULL));
}

/* Rolls back the session's transaction. */
int
fwt_rollback(WT_SESSION *session)
{
	fwt_enter();
	return fwt_leave(session->rollback_transaction(session, NULL));
}

/* Inserts or overwrites once, inside the session's transaction (cursor reset after). */
int
fwt_txn_put(WT_CURSOR *cursor, const void *key, size_t key_len, const void *value,
    size_t value_len)
{
	WT_ITEM k, v;
	int ret;

	fwt_enter();
	fwt_item(&k, key, key_len);
	fwt_item(&v, value, value_len);
	cursor->set_key(cursor, &k);
	cursor->set_value(cursor, &v);
	ret = cursor->insert(cursor);
	(void)cursor->reset(cursor);
	return fwt_leave(ret);
}

/* Removes once, inside the session's transaction; WT_NOTFOUND: no such key. `cursor` is the
 * session's overwrite=false cursor. */
int
fwt_txn_remove(WT_CURSOR *cursor, const void *key, size_t key_len)
{
	WT_ITEM k;
	int ret;

	fwt_enter();
	fwt_item(&k, key, key_len);
	cursor->set_key(cursor, &k);
	ret = cursor->remove(cursor);
	(void)cursor->reset(cursor);
	return fwt_leave(ret);
}

/* Positions the cursor on the last key < `key` (the last key if key_len is 0).
 * WT_NOTFOUND: there is none (cursor already reset). */
int
fwt_seek_before(WT_CURSOR *cursor, const void *key, size_t key_len)
{
	WT_ITEM k;
	int exact, ret;

	fwt_enter();
	if (key_len == 0)
		ret = cursor->prev(cursor);
	else {
		fwt_item(&k, key, key_len);
		cursor->set_key(cursor, &k);
		ret = cursor->search_near(cursor, &exact);
		if (ret == 0 && exact >= 0)
			ret = cursor->prev(cursor);
	}
	if (ret != 0)
		(void)cursor->reset(cursor);
	return fwt_leave(ret);
}

/* Moves to the previous key; WT_NOTFOUND before the first (cursor already reset). */
int
fwt_prev(WT_CURSOR *cursor)
{
	int ret;

	fwt_enter();
	ret = cursor->prev(cursor);
	if (ret != 0)
		(void)cursor->reset(cursor);
	return fwt_leave(ret);
}

/* ---------------------------------------------------------------------------------------------
 * Statistics (the connection opened with statistics=(fast) or more).
 */

/* The connection statistics keys[0..count) (WT_STAT_CONN_*) into values[0..count), through a
 * "statistics:" cursor opened on `session` and closed before returning. Each statistic's
 * description must be names[i] ("cache: pages read into cache"): a key that means something
 * else in this WiredTiger is an error (EINVAL), not a wrong number. */
int
fwt_stats(WT_SESSION *session, const int *keys, const char *const *names, int64_t *values,
    size_t count)
{
	WT_CURSOR *cursor = NULL;
	const char *desc, *pvalue;
	int64_t value;
	size_t i;
	int ret, tret;

	fwt_enter();
	ret = session->open_cursor(session, "statistics:", NULL, NULL, &cursor);
	for (i = 0; ret == 0 && i < count; ++i) {
		cursor->set_key(cursor, keys[i]);
		ret = cursor->search(cursor);
		if (ret == 0)
			ret = cursor->get_value(cursor, &desc, &pvalue, &value);
		if (ret == 0 && strcmp(desc, names[i]) != 0) {
			snprintf(fwt_message, sizeof(fwt_message),
			    "statistic %d is \"%s\", not \"%s\"", keys[i], desc, names[i]);
			ret = EINVAL;
		}
		if (ret == 0)
			values[i] = value;
	}
	if (cursor != NULL && (tret = cursor->close(cursor)) != 0 && ret == 0)
		ret = tret;
	return fwt_leave(ret);
}
