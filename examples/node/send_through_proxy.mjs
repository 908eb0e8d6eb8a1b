// Send messages through `abide proxy` with fetch (Node 18+), 40 at a time, changing only
// the base URL:
//
//   node examples/node/send_through_proxy.mjs http://127.0.0.1:8788/sms 200
//
// Exits 1 if any message was not accepted (2xx). No retry loop of its own: the proxy holds
// each request while the provider is paced or paused, and retries what was not acted on.

const CONCURRENCY = 40;

const [base, countArg] = process.argv.slice(2);
const count = Number(countArg);
let next = 0;
let accepted = 0;
const failures = [];

async function worker() {
  while (next < count) {
    const i = next++;
    const r = await fetch(`${base.replace(/\/$/, "")}/v1/messages`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "abide-max-wait": "60",
        // One key per message: the proxy may resend it after an ambiguous answer (a 503
        // without Retry-After, a timeout), and the provider accepts it once.
        "idempotency-key": crypto.randomUUID(),
      },
      body: JSON.stringify({ to: `+1555${String(i).padStart(7, "0")}`, text: `hello ${i}` }),
    });
    await r.arrayBuffer();
    if (r.ok) accepted++;
    else failures.push(`${r.status} ${r.headers.get("retry-after") ?? ""}`);
  }
}

await Promise.all(Array.from({ length: CONCURRENCY }, worker));
console.log(`node fetch: ${accepted} of ${count} accepted`);
if (failures.length) {
  console.log(`not accepted: ${failures.slice(0, 5).join(", ")}`);
  process.exit(1);
}
