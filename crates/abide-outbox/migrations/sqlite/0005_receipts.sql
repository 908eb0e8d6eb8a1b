-- SMPP delivery receipts. The SMSC's message_id of an item's accepted submit_sm (NULL for
-- HTTP items and before acceptance), and the receipts as they arrive, keyed by provider
-- and message_id; they are matched to items when read (a receipt may arrive before its
-- item's submit_sm_resp is written, or name an id no item carries: kept and counted).
ALTER TABLE items ADD COLUMN message_id TEXT;
CREATE INDEX items_message_id ON items (current_provider, message_id)
WHERE message_id IS NOT NULL;

CREATE TABLE receipts (
    provider   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    -- delivered | undeliverable | expired | rejected | unknown (ReceiptState::as_str)
    state      TEXT NOT NULL,
    -- When the latest receipt for this id was received (ms since the Unix epoch, UTC).
    at_ms      INTEGER NOT NULL,
    PRIMARY KEY (provider, message_id)
);
