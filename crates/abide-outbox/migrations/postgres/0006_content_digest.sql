-- One idempotency key names one message. The first 128 bits of SHA-256 (32 lower-case hex
-- digits) of what makes an item this message (provider, method, path, headers, body: the
-- content a derived key hashes, abide_outbox::keys::content_digest_hex), so that enqueueing
-- a known key with different content is refused instead of silently taken for the stored
-- item. Items stored before this column existed keep NULL: their content is unknown, and a
-- known key with unknown content is accepted as before (never refused on NULL).
ALTER TABLE items ADD COLUMN content_sha256 TEXT;
