-- Documents: a JSON body under (kind, id), with a version for
-- compare-and-set and three index fields. seq is the creation order that
-- List sorts by; AUTOINCREMENT so that it only ever grows.
CREATE TABLE store_documents (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	kind       TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	parent     TEXT    NOT NULL,
	session_id TEXT    NOT NULL,
	user_id    TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	body       TEXT    NOT NULL,
	created    INTEGER NOT NULL, -- Unix time in microseconds
	updated    INTEGER NOT NULL,
	UNIQUE (kind, id)
) STRICT;

CREATE INDEX store_documents_parent ON store_documents (kind, parent, seq);
CREATE INDEX store_documents_session ON store_documents (kind, session_id, seq);
CREATE INDEX store_documents_user ON store_documents (kind, user_id, seq);

-- The outbox: messages to send, in the wire form, by sender. A claim sets
-- lease_until; Sent deletes the row. AUTOINCREMENT: an id is never given
-- twice, so a late Sent cannot remove a newer row.
CREATE TABLE store_outbox (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	sender      TEXT    NOT NULL,
	message     TEXT    NOT NULL,
	created     INTEGER NOT NULL, -- Unix time in microseconds
	attempts    INTEGER NOT NULL DEFAULT 0,
	lease_until INTEGER NOT NULL DEFAULT 0 -- Unix time in microseconds
) STRICT;

CREATE INDEX store_outbox_sender ON store_outbox (sender, id);
