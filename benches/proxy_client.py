"""Bench client for benches/proxy.sh: POST N distinct messages with 40 threads, as one of
two clients the incidents describe, and print one JSON line of what the client saw.

    python3 benches/proxy_client.py urllib3 http://127.0.0.1:8788/sms 3000
    python3 benches/proxy_client.py naive   http://127.0.0.1:8080     3000

- urllib3: urllib3.Retry(total=5) on 429/503 for every method, honouring Retry-After.
- naive: every non-2xx retried five times on its own 1, 2, 4, 8, 16 s schedule, ignoring
  Retry-After.
"""

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import urllib3

THREADS = 40
NAIVE_SCHEDULE = [1, 2, 4, 8, 16]


def main() -> int:
    kind, base, count = sys.argv[1], sys.argv[2].rstrip("/"), int(sys.argv[3])
    token = "demo-key"
    if kind == "urllib3":
        retries = urllib3.Retry(
            total=5,
            status_forcelist=[429, 503],
            allowed_methods=None,
            respect_retry_after_header=True,
            backoff_factor=0.5,
        )
    else:
        retries = False
    http = urllib3.PoolManager(maxsize=THREADS, retries=retries)

    def once(i: int) -> int:
        body = json.dumps({"to": f"+1555{i:07d}", "text": f"hello {i}"})
        r = http.request(
            "POST",
            f"{base}/v1/messages",
            body=body,
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token}",
                "Idempotency-Key": f"bench-{i}",
                "Abide-Max-Wait": "120",
            },
        )
        return r.status

    def send(i: int) -> int:
        try:
            status = once(i)
            if kind == "naive":
                for delay in NAIVE_SCHEDULE:
                    if 200 <= status < 300:
                        break
                    time.sleep(delay)
                    status = once(i)
            return status
        except urllib3.exceptions.MaxRetryError:
            return 0

    start = time.monotonic()
    with ThreadPoolExecutor(THREADS) as pool:
        statuses = list(pool.map(send, range(count)))
    elapsed = time.monotonic() - start
    ok = sum(1 for s in statuses if 200 <= s < 300)
    print(json.dumps({"client": kind, "sent": count, "ok": ok, "failed": count - ok,
                      "elapsed_s": round(elapsed, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
