-- Claim keeps a sender's order per recipient: it hands out no entry while
-- an older one of the same sender to the same recipient is leased. The
-- recipient, read from the message by Apply, is kept with each entry;
-- entries queued before this migration get it from their message here.
ALTER TABLE store_outbox ADD COLUMN recipient TEXT NOT NULL DEFAULT '';

UPDATE store_outbox SET recipient = coalesce(json_extract(message, '$.to'), '')
WHERE json_valid(message);

-- What Claim asks of each candidate: is an entry of its sender to its
-- recipient leased? Only the leased rows of the pair are read.
CREATE INDEX store_outbox_leased ON store_outbox (sender, recipient, lease_until);
