-- Documents: a JSON body under (kind, id), with a version for
-- compare-and-set and three index fields. seq is the creation order that
-- List sorts by. body is json, not jsonb: it reads back byte for byte.
CREATE TABLE store_documents (
	seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind       text        NOT NULL,
	id         text        NOT NULL,
	parent     text        NOT NULL,
	session_id text        NOT NULL,
	user_id    text        NOT NULL,
	version    bigint      NOT NULL,
	body       json        NOT NULL,
	created    timestamptz NOT NULL,
	updated    timestamptz NOT NULL,
	UNIQUE (kind, id)
);

CREATE INDEX store_documents_parent ON store_documents (kind, parent, seq);
CREATE INDEX store_documents_session ON store_documents (kind, session_id, seq);
CREATE INDEX store_documents_user ON store_documents (kind, user_id, seq);

-- The outbox: messages to send, in the wire form, by sender. A claim sets
-- lease_until (rows are picked FOR UPDATE SKIP LOCKED); Sent deletes the
-- row. Identity values are never given twice.
CREATE TABLE store_outbox (
	id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sender      text        NOT NULL,
	message     json        NOT NULL,
	created     timestamptz NOT NULL,
	attempts    integer     NOT NULL DEFAULT 0,
	lease_until timestamptz NOT NULL DEFAULT '-infinity'
);

CREATE INDEX store_outbox_sender ON store_outbox (sender, id);
