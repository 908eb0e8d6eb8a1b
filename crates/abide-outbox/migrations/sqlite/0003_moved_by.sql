-- Why the outbox itself (not the remote) put an item back in the queue: 'lease_expired' or
-- 'failed_over' (MovedBy::as_str), NULL otherwise. The retry budget decides on this
-- column, never on the free-text reason; reasons keep their values.
ALTER TABLE items ADD COLUMN moved_by TEXT;

-- Items stored before this column: the one place the old reason strings are read.
UPDATE items SET moved_by = 'lease_expired' WHERE reason = 'lease_expired';
UPDATE items SET moved_by = 'failed_over'
WHERE substr(reason, 1, 17) = 'failed_over_from:';
