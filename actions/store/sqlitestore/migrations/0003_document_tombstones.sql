-- Versions never repeat for a kind and id. A deleted document leaves a
-- tombstone: its row, marked deleted, emptied of body and index fields,
-- at the version it was deleted at. A document created again takes the
-- tombstone's place with the next version (and a new seq: it is new to
-- List). Get and List skip tombstones, and so do the indexes.
ALTER TABLE store_documents ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0;

DROP INDEX store_documents_parent;
DROP INDEX store_documents_session;
DROP INDEX store_documents_user;
CREATE INDEX store_documents_parent ON store_documents (kind, parent, seq) WHERE NOT deleted;
CREATE INDEX store_documents_session ON store_documents (kind, session_id, seq) WHERE NOT deleted;
CREATE INDEX store_documents_user ON store_documents (kind, user_id, seq) WHERE NOT deleted;
