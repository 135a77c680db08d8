// accelkv's RESP session with ioredis and node-redis v4 (tests/clients/README.md): the same
// script as every client of the matrix (both speak RESP2). The server's address and password
// come from ACCELKV_RESP_ADDR and ACCELKV_PASSWORD.
import assert from "node:assert/strict";
import Redis from "ioredis";
import { createClient } from "redis";

const [host, port] = (process.env.ACCELKV_RESP_ADDR ?? "").split(":");
const password = process.env.ACCELKV_PASSWORD;
if (!port) {
  console.error("ACCELKV_RESP_ADDR is not set (server/tests/clients.rs sets it)");
  process.exit(2);
}

// The script, over a client adapter: call(args) sends one command (Buffers in, Buffers or
// strings out), pipeline(cmds) sends many at once.
async function session(name, c) {
  await assert.rejects(c.anonGet("k"), /NOAUTH/);
  assert.equal(await c.call(["PING"]), "PONG");
  const blob = Buffer.from(Array.from({ length: 1024 }, (_, i) => i % 256));
  await c.call(["SET", "bin\0key", blob]);
  assert.deepEqual(await c.callBuffer(["GET", "bin\0key"]), blob);
  assert.equal(await c.call(["GET", "missing"]), null);
  const sets = Array.from({ length: 1000 }, (_, i) => ["SET", `p:${String(i).padStart(4, "0")}`, String(i)]);
  await c.pipeline(sets);
  const gets = await c.pipeline(sets.map(([, k]) => ["GET", k]));
  assert.deepEqual(gets, sets.map(([, , v]) => v));
  const written = new Set();
  for (let at = 0; at < 10000; at += 1000) {
    const args = ["MSET"];
    for (let i = at; i < at + 1000; i++) {
      const k = `s:${String(i).padStart(5, "0")}`;
      written.add(k);
      args.push(k, "v");
    }
    assert.equal(await c.call(args), "OK");
  }
  const seen = new Set();
  let cursor = "0";
  do {
    const [next, keys] = await c.call(["SCAN", cursor, "MATCH", "s:*", "COUNT", "500"]);
    for (const k of keys) {
      assert.ok(!seen.has(k), `SCAN returned ${k} twice`);
      seen.add(k);
    }
    cursor = next;
  } while (cursor !== "0");
  assert.deepEqual([...seen].sort(), [...written].sort());
  assert.equal(await c.call(["INCRBY", "n", "42"]), 42);
  assert.deepEqual(await c.call(["MGET", "n", "missing"]), ["42", null]);
  assert.equal(await c.call(["DEL", "n", "missing"]), 1);
  // MULTI/EXEC, and WATCH: a change by another connection makes EXEC fail (null).
  assert.deepEqual(await c.multiExec([["SET", "tx:a", "1"], ["INCR", "tx:a"]]), ["OK", 2]);
  await c.watch("tx:a");
  await c.other(["SET", "tx:a", "changed"]);
  assert.equal(await c.multiExec([["SET", "tx:a", "mine"]]), null);
  assert.equal(await c.call(["GET", "tx:a"]), "changed");
  await c.watch("tx:a");
  assert.deepEqual(await c.multiExec([["SET", "tx:a", "mine"]]), ["OK"]);
  assert.equal(await c.call(["GET", "tx:a"]), "mine");
  // Expiry: EXPIRE, then TTL, then the key observed gone; SET EX and PERSIST.
  await c.call(["SET", "ttl:a", "v"]);
  assert.equal(await c.call(["EXPIRE", "ttl:a", "100"]), 1);
  const ttl = await c.call(["TTL", "ttl:a"]);
  assert.ok(ttl >= 99 && ttl <= 100, `TTL ${ttl}`);
  assert.equal(await c.call(["PEXPIRE", "ttl:a", "300"]), 1);
  const pttl = await c.call(["PTTL", "ttl:a"]);
  assert.ok(pttl > 0 && pttl <= 300, `PTTL ${pttl}`);
  assert.equal(await c.call(["SET", "ttl:b", "v", "EX", "100"]), "OK");
  assert.equal(await c.call(["PERSIST", "ttl:b"]), 1);
  assert.equal(await c.call(["TTL", "ttl:b"]), -1);
  assert.equal(await c.call(["TTL", "ttl:missing"]), -2);
  await new Promise((done) => setTimeout(done, 400));
  assert.equal(await c.call(["GET", "ttl:a"]), null);
  assert.equal(await c.call(["EXISTS", "ttl:a"]), 0);
  await c.call(["DEL", "ttl:b"]);
  // Hashes and sets: fields in byte order, a pipeline, a transaction, WRONGTYPE.
  assert.equal(await c.call(["HSET", "h", "a", "1", "b", "2"]), 2);
  assert.deepEqual(await c.call(["HGETALL", "h"]), ["a", "1", "b", "2"]);
  assert.equal(await c.call(["HINCRBY", "h", "a", "5"]), 6);
  assert.equal(await c.call(["HDEL", "h", "b", "zz"]), 1);
  assert.equal(await c.call(["SADD", "s", "z", "x", "y"]), 3);
  assert.deepEqual(await c.call(["SMEMBERS", "s"]), ["x", "y", "z"]);
  assert.equal(await c.call(["SISMEMBER", "s", "y"]), 1);
  const adds = [];
  for (let i = 0; i < 100; i++) adds.push(["HSET", "ph", `f${i}`, String(i)], ["SADD", "ps", String(i)]);
  const counts = await c.pipeline([...adds, ["HLEN", "ph"], ["SCARD", "ps"]]);
  assert.deepEqual(counts.slice(-2), [100, 100]);
  assert.deepEqual(await c.multiExec([["HSET", "th", "k", "v"], ["SADD", "ts", "m"], ["HGETALL", "th"]]), [
    1, 1, ["k", "v"],
  ]);
  assert.equal(await c.call(["TYPE", "ts"]), "set");
  await assert.rejects(c.call(["GET", "h"]), /^(Error|ReplyError|ErrorReply)?:? ?WRONGTYPE/);
  await c.call(["DEL", "h", "s", "ph", "ps", "th", "ts"]);
  await listsAndSortedSets(c);
  await pubsub(c);
  await assert.rejects(c.call(["GET", "a", "b"]), /wrong number of arguments for 'get' command/);
  assert.deepEqual(await c.call(["RANGE", "p:0010", "p:0013"]), [
    "p:0010", "10", "p:0011", "11", "p:0012", "12",
  ]);
  assert.equal(await c.call(["FLUSHALL"]), "OK");
  console.log(`${name}: ok`);
}

// Lists and sorted sets: pushes and pops, ranges, scores, a pipeline, a transaction, and a
// blocking pop on the other connection woken by a push from this one.
// Pub/sub: a channel and a pattern on a second connection, messages in publish order.
// collect(want): the messages a subscriber's handlers push, and a promise kept once `want`
// have come; publishAll(n, publish): m0…m(n-1), each reaching both subscriptions.
function collect(want) {
  const items = [];
  let resolve;
  const done = new Promise((res) => (resolve = res));
  const push = (x) => {
    items.push(x);
    if (items.length === want) resolve();
  };
  return { items, done, push };
}

async function publishAll(n, publish) {
  for (let i = 0; i < n; i++) assert.equal(await publish(`m${i}`), 2);
}

async function pubsub(c) {
  const n = 20;
  const got = await c.pubsubRun(n);
  const want = [];
  for (let i = 0; i < n; i++) want.push(["message", "news", `m${i}`], ["pmessage", "news", `m${i}`]);
  assert.deepEqual(got, want);
}

async function listsAndSortedSets(c) {
  assert.equal(await c.call(["RPUSH", "l", "a", "b", "c"]), 3);
  assert.deepEqual(await c.call(["LRANGE", "l", "0", "-1"]), ["a", "b", "c"]);
  assert.equal(await c.call(["LPOP", "l"]), "a");
  assert.equal(await c.call(["ZADD", "z", "1", "a", "2.5", "b", "-1", "c"]), 3);
  assert.deepEqual(await c.call(["ZRANGE", "z", "0", "-1", "WITHSCORES"]), ["c", "-1", "a", "1", "b", "2.5"]);
  assert.equal(await c.call(["ZSCORE", "z", "b"]), "2.5");
  assert.deepEqual(await c.call(["ZPOPMIN", "z"]), ["c", "-1"]);
  const adds = [];
  for (let i = 0; i < 100; i++) adds.push(["RPUSH", "pl", String(i)], ["ZADD", "pz", String(i), `m${i}`]);
  const counts = await c.pipeline([...adds, ["LLEN", "pl"], ["ZCARD", "pz"]]);
  assert.deepEqual(counts.slice(-2), [100, 100]);
  assert.deepEqual(await c.multiExec([["RPUSH", "tl", "x"], ["ZADD", "tz", "1", "m"], ["LRANGE", "tl", "0", "-1"]]), [
    1, 1, ["x"],
  ]);
  assert.equal(await c.call(["TYPE", "tz"]), "zset");
  const popped = c.other(["BLPOP", "jobs", "10"]);
  const deadline = Date.now() + 10000;
  while (!String(await c.call(["INFO", "clients"])).includes("blocked_clients:1")) {
    assert.ok(Date.now() < deadline, "BLPOP never parked");
    await new Promise((r) => setTimeout(r, 10));
  }
  await c.call(["RPUSH", "jobs", "job-1"]);
  assert.deepEqual(await popped, ["jobs", "job-1"]);
  await c.call(["DEL", "l", "z", "pl", "pz", "tl", "tz"]);
  // A script: EVAL, then EVALSHA by its SHA-1 after SCRIPT LOAD.
  assert.deepEqual(await c.call(["EVAL", "return {KEYS[1], ARGV[1]}", "1", "k", "v"]), ["k", "v"]);
  const sha = await c.call(["SCRIPT", "LOAD", "return redis.call('incrby', KEYS[1], ARGV[1])"]);
  assert.equal(await c.call(["EVALSHA", sha, "1", "sc", "5"]), 5);
  await c.call(["DEL", "sc"]);
}

async function ioredis() {
  // Its ready check (INFO) is refused without AUTH too: off, and its errors expected.
  const anon = new Redis({ host, port: Number(port), enableReadyCheck: false, maxRetriesPerRequest: 0 });
  anon.on("error", () => {});
  const r = new Redis({ host, port: Number(port), password });
  const o = new Redis({ host, port: Number(port), password });
  const c = {
    multiExec: async (cmds) => {
      const res = await r.multi(cmds.map(([cmd, ...a]) => ["call", cmd, ...a])).exec();
      if (res === null) return null;
      return res.map(([err, v]) => {
        if (err) throw err;
        return v;
      });
    },
    watch: (k) => r.watch(k),
    other: (args) => o.call(...args),
    anonGet: (k) => anon.get(k),
    pubsubRun: async (n) => {
      const sub = new Redis({ host, port: Number(port), password });
      const got = collect(2 * n);
      sub.on("message", (ch, m) => got.push(["message", ch, m]));
      sub.on("pmessage", (_p, ch, m) => got.push(["pmessage", ch, m]));
      await sub.subscribe("news");
      await sub.psubscribe("n*");
      await publishAll(n, (m) => r.publish("news", m));
      await got.done;
      sub.disconnect();
      return got.items;
    },
    call: (args) => r.call(...args),
    callBuffer: (args) => r.callBuffer(...args),
    pipeline: async (cmds) => {
      const res = await r.pipeline(cmds.map(([cmd, ...a]) => ["call", cmd, ...a])).exec();
      return res.map(([err, v]) => {
        if (err) throw err;
        return v;
      });
    },
  };
  try {
    const { default: pkg } = await import("ioredis/package.json", { with: { type: "json" } });
    await session(`ioredis ${pkg.version}`, c);
  } finally {
    anon.disconnect();
    r.disconnect();
    o.disconnect();
  }
}

async function nodeRedis() {
  const url = `redis://${host}:${port}`;
  const anon = createClient({ url });
  anon.on("error", () => {});
  await anon.connect();
  const r = createClient({ url, password });
  await r.connect();
  const o = createClient({ url, password });
  await o.connect();
  const str = (args) => args.map((a) => (Buffer.isBuffer(a) ? a : String(a)));
  const c = {
    multiExec: async (cmds) => {
      const m = r.multi();
      for (const cmd of cmds) m.addCommand(str(cmd));
      try {
        return await m.exec();
      } catch (e) {
        if (e.name === "WatchError" || e.constructor?.name === "WatchError") return null;
        throw e;
      }
    },
    watch: (k) => r.watch(k),
    other: (args) => o.sendCommand(str(args)),
    anonGet: (k) => anon.get(k),
    pubsubRun: async (n) => {
      const sub = r.duplicate();
      await sub.connect();
      const got = collect(2 * n);
      await sub.subscribe("news", (m, ch) => got.push(["message", ch, m]));
      await sub.pSubscribe("n*", (m, ch) => got.push(["pmessage", ch, m]));
      await publishAll(n, (m) => r.publish("news", m));
      await got.done;
      await sub.disconnect();
      return got.items;
    },
    call: (args) => r.sendCommand(str(args)),
    callBuffer: (args) => r.sendCommand(str(args), { returnBuffers: true }),
    pipeline: (cmds) => {
      const m = r.multi();
      for (const cmd of cmds) m.addCommand(str(cmd));
      return m.execAsPipeline();
    },
  };
  try {
    const { default: pkg } = await import("redis/package.json", { with: { type: "json" } });
    await session(`node-redis ${pkg.version}`, c);
  } finally {
    await anon.disconnect();
    await r.disconnect();
    await o.disconnect();
  }
}

await ioredis();
await nodeRedis();
