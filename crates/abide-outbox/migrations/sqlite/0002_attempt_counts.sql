-- "Count by what the remote side said" without reading every attempt: one row per
-- (provider, remote code), bumped in the same transaction as the attempts insert.
-- kind: 0 no response, 1 HTTP status, 2 SMPP command_status; code is 0 for no response.
CREATE TABLE attempt_counts (
    provider TEXT NOT NULL,
    kind     INTEGER NOT NULL,
    code     INTEGER NOT NULL,
    n        INTEGER NOT NULL,
    PRIMARY KEY (provider, kind, code)
);

INSERT INTO attempt_counts (provider, kind, code, n)
SELECT provider,
       CASE WHEN remote_http_status IS NOT NULL THEN 1
            WHEN remote_smpp_code IS NOT NULL THEN 2
            ELSE 0 END,
       COALESCE(remote_http_status, remote_smpp_code, 0),
       COUNT(*)
FROM attempts
GROUP BY 1, 2, 3;

-- Only the old GROUP BY used it; every attempts insert paid for it.
DROP INDEX attempts_remote;
