// BullMQ, a job queue that ships its own Lua scripts (cmsgpack, sorted sets, lists, hashes,
// streams), run against accelkv as its users run it against Redis (tests/clients/README.md):
// a queue, a worker with concurrency, a delayed job, a prioritized job, a job that fails
// and is retried with backoff, one that fails for good, progress updates, QueueEvents
// (XREAD BLOCK on the events stream) seeing every completion, the counts, then a clean
// obliterate. The server's address and password come from ACCELKV_RESP_ADDR and
// ACCELKV_PASSWORD.
import assert from "node:assert/strict";
import { Queue, QueueEvents, Worker } from "bullmq";

const [host, port] = (process.env.ACCELKV_RESP_ADDR ?? "").split(":");
if (!port) {
  console.error("ACCELKV_RESP_ADDR is not set (server/tests/clients.rs sets it)");
  process.exit(2);
}
const connection = { host, port: Number(port), password: process.env.ACCELKV_PASSWORD };
const name = "jobs";

const queue = new Queue(name, { connection });
const events = new QueueEvents(name, { connection });
await events.waitUntilReady();

const completedEvents = new Map();
events.on("completed", ({ jobId, returnvalue }) => completedEvents.set(jobId, returnvalue));
const progressEvents = [];
events.on("progress", ({ jobId, data }) => progressEvents.push([jobId, data]));

const started = new Map();
const worker = new Worker(
  name,
  async (job) => {
    started.set(job.id, Date.now());
    if (job.name === "flaky" && job.attemptsMade === 0) throw new Error("first try fails");
    if (job.name === "broken") throw new Error("always fails");
    if (job.name === "slow") {
      await job.updateProgress(50);
      await job.updateProgress(100);
    }
    return { doubled: job.data.n * 2 };
  },
  { connection, concurrency: 4 },
);
const settled = new Map();
worker.on("completed", (job, result) => settled.set(job.id, ["completed", result]));
worker.on("failed", (job, err) => {
  if (job.attemptsMade >= (job.opts.attempts ?? 1)) settled.set(job.id, ["failed", err.message]);
});
worker.on("error", (err) => {
  console.error("worker error:", err);
  process.exitCode = 1;
});

const t0 = Date.now();
const plain = await queue.addBulk(
  Array.from({ length: 20 }, (_, i) => ({ name: "plain", data: { n: i } })),
);
const delayed = await queue.add("delayed", { n: 100 }, { delay: 800 });
const urgent = await queue.add("urgent", { n: 200 }, { priority: 1 });
const flaky = await queue.add("flaky", { n: 300 }, { attempts: 3, backoff: { type: "fixed", delay: 200 } });
const broken = await queue.add("broken", { n: 400 }, { attempts: 2 });
const slow = await queue.add("slow", { n: 500 });
const all = [...plain, delayed, urgent, flaky, broken, slow];

const deadline = Date.now() + 20000;
while (settled.size < all.length || completedEvents.size < all.length - 1) {
  assert.ok(Date.now() < deadline, `timed out: ${settled.size} settled, ${completedEvents.size} events`);
  await new Promise((r) => setTimeout(r, 50));
}

for (const job of all.filter((j) => j.id !== broken.id)) {
  assert.deepEqual(settled.get(job.id), ["completed", { doubled: job.data.n * 2 }], job.name);
  assert.deepEqual(JSON.parse(JSON.stringify(completedEvents.get(job.id))), { doubled: job.data.n * 2 });
}
assert.deepEqual(settled.get(broken.id), ["failed", "always fails"]);
assert.ok(started.get(delayed.id) - t0 >= 750, "the delayed job waited for its delay");

const flakyNow = await queue.getJob(flaky.id);
assert.equal(flakyNow.attemptsMade, 2);
const brokenNow = await queue.getJob(broken.id);
assert.equal(brokenNow.failedReason, "always fails");
assert.equal(brokenNow.attemptsMade, 2);
assert.deepEqual(
  progressEvents.filter(([id]) => id === slow.id).map(([, d]) => d),
  [50, 100],
);

const counts = await queue.getJobCounts("completed", "failed", "wait", "active", "delayed");
assert.deepEqual(counts, { completed: all.length - 1, failed: 1, wait: 0, active: 0, delayed: 0 });
const failed = await queue.getFailed();
assert.deepEqual(failed.map((j) => j.id), [broken.id]);
const completed = await queue.getCompleted(0, 4);
assert.equal(completed.length, 5);

// A retry of the failed job runs it again (it fails again, for good).
await brokenNow.retry();
const again = Date.now() + 10000;
while ((await queue.getJobCounts("failed")).failed !== 1 || (await brokenNow.getState()) !== "failed") {
  assert.ok(Date.now() < again, "the retried job settled");
  await new Promise((r) => setTimeout(r, 50));
}

await worker.close();
await events.close();
await queue.obliterate({ force: true });
const left = await (await queue.client).keys(`bull:${name}:*`);
assert.deepEqual(left, [], "obliterate removed every key of the queue");
await queue.close();
console.log(`bullmq: ${all.length} jobs (delayed, prioritized, retried, failed, progress), events and obliterate passed`);
