"""Send messages through `abide proxy` with urllib3, the way the incidents' Python clients
did (40 threads, urllib3's own retries honouring Retry-After), changing only the base URL.

    python3 examples/python/send_through_proxy.py http://127.0.0.1:8788/sms 200

Exits 1 if any message was not accepted (2xx). The proxy holds each request while the
provider is paced or paused, so the provider sees next to no 429s; urllib3's retries stay
as a last resort for the proxy's own 429 (a wait longer than the request's budget).
"""

import json
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

import urllib3

THREADS = 40


def main() -> int:
    base, count = sys.argv[1].rstrip("/"), int(sys.argv[2])
    retry = urllib3.Retry(
        total=5,
        status_forcelist=[429, 503],
        allowed_methods=None,  # POST too: the proxy only answers 429 for requests not sent
        respect_retry_after_header=True,
        backoff_factor=0.5,
    )
    http = urllib3.PoolManager(maxsize=THREADS, retries=retry)

    def send(i: int) -> int:
        body = json.dumps({"to": f"+1555{i:07d}", "text": f"hello {i}"})
        r = http.request(
            "POST",
            f"{base}/v1/messages",
            body=body,
            headers={
                "Content-Type": "application/json",
                "Abide-Max-Wait": "60",
                # One key per message: the proxy may then resend it after an ambiguous
                # answer (a 503 without Retry-After, a timeout), and the provider
                # accepts it once.
                "Idempotency-Key": str(uuid.uuid4()),
            },
        )
        return r.status

    with ThreadPoolExecutor(THREADS) as pool:
        statuses = list(pool.map(send, range(count)))
    failed = [s for s in statuses if not 200 <= s < 300]
    print(f"python urllib3: {count - len(failed)} of {count} accepted")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
