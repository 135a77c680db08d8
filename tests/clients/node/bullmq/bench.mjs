// BullMQ's throughput on one server (scripts/bench-bullmq.sh runs it against accelkv and
// Redis in one run): JOBS jobs added in bulks of 500, then one worker with concurrency 16
// processing them (each returns at once), timed from the first add to the last completion.
// Prints one line: `adds/s <n> processed/s <n>`. Address from ACCELKV_RESP_ADDR.
import { Queue, Worker } from "bullmq";

const [host, port] = (process.env.ACCELKV_RESP_ADDR ?? "").split(":");
const jobs = Number(process.env.JOBS ?? 20000);
const connection = { host, port: Number(port) };
const name = `bench${Date.now()}`;
const queue = new Queue(name, { connection });
await queue.waitUntilReady();

const t0 = process.hrtime.bigint();
for (let at = 0; at < jobs; at += 500) {
  await queue.addBulk(
    Array.from({ length: Math.min(500, jobs - at) }, (_, i) => ({ name: "j", data: { n: at + i } })),
    );
}
const t1 = process.hrtime.bigint();
let done = 0;
let finish;
const all = new Promise((r) => (finish = r));
const worker = new Worker(name, async (job) => job.data.n, {
  connection,
  concurrency: 16,
  removeOnComplete: { count: 1000 },
});
worker.on("completed", () => {
  done += 1;
  if (done === jobs) finish();
});
await all;
const t2 = process.hrtime.bigint();
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
const secs = (a, b) => Number(b - a) / 1e9;
console.log(`adds/s ${Math.round(jobs / secs(t0, t1))} processed/s ${Math.round(jobs / secs(t1, t2))}`);
