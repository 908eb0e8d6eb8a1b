// The HTTP client alone, no queue: N POSTs with Node's fetch, C at a time, to URL. Shows
// what bounds the BullMQ HTTP figure of benches/peers.sh. Prints requests/s.
//
//   node benches/peers/fetch_only.mjs URL [N] [C]
const [url, n = "20000", c = "32"] = process.argv.slice(2);
const total = Number(n);
let started = 0;
const t0 = process.hrtime.bigint();
async function sender() {
  while (started < total) {
    started += 1;
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"to":"+15550100","text":"Your code is 1234"}',
    });
    await res.arrayBuffer();
  }
}
await Promise.all(Array.from({ length: Number(c) }, sender));
console.log(Math.round(total / (Number(process.hrtime.bigint() - t0) / 1e9)));
