// BullMQ (Node, Redis) doing what abide's engine bench does: N jobs already queued, one
// worker process takes each, runs it (no-op, or a POST to a loopback server) and records it
// completed. Prints one JSON line: jobs/s and CPU µs per job of this process and of Redis.
//
//   node benches/peers/bullmq.mjs --jobs 20000 --concurrency 32 [--post http://127.0.0.1:PORT/]
//
// Redis at 127.0.0.1:6379 (REDIS_PORT to change); the queue's keys (prefix
// abide-peer-bench) are removed before and after.
import { Queue, Worker } from "bullmq";
import { readFileSync } from "node:fs";
import { execSync } from "node:child_process";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => {
    if (a.startsWith("--")) acc.push([a.slice(2), all[i + 1]]);
    return acc;
  }, []),
);
const jobs = Number(args.jobs ?? 20000);
const concurrency = Number(args.concurrency ?? 32);
const post = args.post; // a URL: each job POSTs a small JSON body there
const connection = { host: "127.0.0.1", port: Number(process.env.REDIS_PORT ?? 6379) };
const prefix = "abide-peer-bench";
const name = "bench";

// Redis's own CPU (utime + stime of the server process, in clock ticks of 10 ms).
function redisTicks() {
  const pid = execSync("pidof redis-server").toString().trim().split(/\s+/)[0];
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return Number(f[11]) + Number(f[12]);
}

const queue = new Queue(name, { connection, prefix });
await queue.obliterate({ force: true });
for (let i = 0; i < jobs; i += 5000) {
  const n = Math.min(5000, jobs - i);
  await queue.addBulk(
    Array.from({ length: n }, (_, k) => ({
      name: "sms",
      data: { to: `+1555${String(i + k).padStart(7, "0")}`, text: "Your code is 1234" },
      opts: { jobId: `job-${i + k}`, attempts: 5, backoff: { type: "exponential", delay: 500 } },
    })),
  );
}

let done = 0;
let finish;
const finished = new Promise((r) => (finish = r));
const cpu0 = process.cpuUsage();
const redis0 = redisTicks();
const t0 = process.hrtime.bigint();
const worker = new Worker(
  name,
  async (job) => {
    if (post) {
      const res = await fetch(post, {
        method: "POST",
        headers: { "content-type": "application/json", "idempotency-key": job.id },
        body: JSON.stringify(job.data),
      });
      await res.arrayBuffer();
      if (res.status >= 300) throw new Error(`status ${res.status}`);
    }
  },
  { connection, prefix, concurrency },
);
worker.on("completed", () => {
  done += 1;
  if (done === jobs) finish();
});
await finished;
const secs = Number(process.hrtime.bigint() - t0) / 1e9;
const cpu = process.cpuUsage(cpu0);
const redisUs = (redisTicks() - redis0) * 10_000;
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
console.log(
  JSON.stringify({
    peer: "bullmq",
    version: JSON.parse(readFileSync(new URL("./node_modules/bullmq/package.json", import.meta.url))).version,
    mode: post ? "http" : "noop",
    jobs,
    concurrency,
    secs: +secs.toFixed(3),
    jobs_per_sec: Math.round(jobs / secs),
    cpu_us_per_job_node: +((cpu.user + cpu.system) / jobs).toFixed(1),
    cpu_us_per_job_redis: +(redisUs / jobs).toFixed(1),
  }),
);
