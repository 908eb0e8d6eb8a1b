-- Requests put on the wire under the current lease whose answers are not recorded yet. The
-- dispatcher adds one (committed) before each request goes out; a completion records the
-- attempts it made and sets it back to 0; a reclaimed lease charges the item exactly this
-- many attempts. A claim handed back or reclaimed unsent costs nothing.
ALTER TABLE items ADD COLUMN sent_unrecorded INTEGER NOT NULL DEFAULT 0;

-- Items left IN_FLIGHT by a version that did not mark sends: it may have sent them, and
-- it charged one attempt on reclaim. Keep that for them.
UPDATE items SET sent_unrecorded = 1 WHERE state = 'IN_FLIGHT';
