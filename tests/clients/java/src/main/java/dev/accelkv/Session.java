// accelkv's RESP session with Jedis 5 (tests/clients/README.md): the same script as every
// client of the matrix, over RESP2 and RESP3. The server's address and password come from
// ACCELKV_RESP_ADDR and ACCELKV_PASSWORD.
package dev.accelkv;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;
import redis.clients.jedis.util.SafeEncoder;

public final class Session {
  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  static final ProtocolCommand RANGE = () -> SafeEncoder.encode("RANGE");

  static void session(HostAndPort addr, String password, RedisProtocol protocol) {
    try (Jedis anon = new Jedis(addr, DefaultJedisClientConfig.builder().build())) {
      try {
        anon.get("k");
        throw new AssertionError("a command without AUTH was served");
      } catch (JedisDataException e) {
        check(e.getMessage().contains("NOAUTH"), e.getMessage());
      }
    }
    var config = DefaultJedisClientConfig.builder().password(password).protocol(protocol).build();
    try (Jedis r = new Jedis(addr, config)) {
      check(r.ping().equals("PONG"), "PING");
      byte[] blob = new byte[1024];
      for (int i = 0; i < blob.length; i++) blob[i] = (byte) i;
      byte[] key = "bin\0key".getBytes(StandardCharsets.UTF_8);
      r.set(key, blob);
      check(Arrays.equals(r.get(key), blob), "binary value");
      check(r.get("missing") == null, "missing key");
      Pipeline p = r.pipelined();
      for (int i = 0; i < 1000; i++) p.set(String.format("p:%04d", i), String.valueOf(i));
      p.sync();
      List<Response<String>> gets = new ArrayList<>();
      for (int i = 0; i < 1000; i++) gets.add(p.get(String.format("p:%04d", i)));
      p.sync();
      for (int i = 0; i < 1000; i++) check(gets.get(i).get().equals(String.valueOf(i)), "pipelined GET " + i);
      Set<String> written = new HashSet<>();
      for (int at = 0; at < 10000; at += 1000) {
        String[] kv = new String[2000];
        for (int i = 0; i < 1000; i++) {
          String k = String.format("s:%05d", at + i);
          written.add(k);
          kv[2 * i] = k;
          kv[2 * i + 1] = "v";
        }
        check(r.mset(kv).equals("OK"), "MSET");
      }
      Set<String> seen = new HashSet<>();
      String cursor = ScanParams.SCAN_POINTER_START;
      ScanParams params = new ScanParams().match("s:*").count(500);
      do {
        ScanResult<String> page = r.scan(cursor, params);
        for (String k : page.getResult()) check(seen.add(k), "SCAN returned " + k + " twice");
        cursor = page.getCursor();
      } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
      check(seen.equals(written), "SCAN found " + seen.size() + " keys of " + written.size());
      check(r.incrBy("n", 42) == 42, "INCRBY");
      check(r.mget("n", "missing").equals(Arrays.asList("42", null)), "MGET");
      check(r.del("n", "missing") == 1, "DEL");
      // MULTI/EXEC, and WATCH: a change by another connection makes EXEC fail (null).
      Transaction t = r.multi();
      t.set("tx:a", "1");
      Response<Long> incr = t.incr("tx:a");
      check(t.exec() != null && incr.get() == 2, "MULTI/EXEC");
      r.watch("tx:a");
      try (Jedis other = new Jedis(addr, config)) {
        other.set("tx:a", "changed");
      }
      t = r.multi();
      t.set("tx:a", "mine");
      check(t.exec() == null, "EXEC ran although a watched key changed");
      check(r.get("tx:a").equals("changed"), "after the WATCH conflict");
      r.watch("tx:a");
      t = r.multi();
      t.set("tx:a", "mine");
      check(t.exec() != null && r.get("tx:a").equals("mine"), "WATCH without conflict");
      // Expiry: EXPIRE, then TTL, then the key observed gone; SET EX and PERSIST.
      r.set("ttl:a", "v");
      check(r.expire("ttl:a", 100) == 1, "EXPIRE");
      long ttl = r.ttl("ttl:a");
      check(ttl >= 99 && ttl <= 100, "TTL " + ttl);
      check(r.pexpire("ttl:a", 300) == 1, "PEXPIRE");
      long pttl = r.pttl("ttl:a");
      check(pttl > 0 && pttl <= 300, "PTTL " + pttl);
      check(r.setex("ttl:b", 100, "v").equals("OK"), "SETEX");
      check(r.persist("ttl:b") == 1 && r.ttl("ttl:b") == -1, "PERSIST");
      check(r.ttl("ttl:missing") == -2, "TTL of a missing key");
      try {
        Thread.sleep(400);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
      check(r.get("ttl:a") == null && !r.exists("ttl:a"), "the key expired");
      r.del("ttl:b");
      try {
        r.sendCommand(() -> SafeEncoder.encode("GET"), "a", "b");
        throw new AssertionError("GET with two keys was accepted");
      } catch (JedisDataException e) {
        check(e.getMessage().contains("wrong number of arguments for 'get' command"), e.getMessage());
      }
      collections(r);
      listsAndSortedSets(r, addr, config);
      pubsub(r, addr, config);
      Object range = r.sendCommand(RANGE, "p:0010", "p:0013");
      List<String> got = new ArrayList<>();
      for (Object o : (List<?>) range) got.add(SafeEncoder.encode((byte[]) o));
      check(got.equals(List.of("p:0010", "10", "p:0011", "11", "p:0012", "12")), "RANGE " + got);
      check(r.flushAll().equals("OK"), "FLUSHALL");
    }
  }

  /** Hashes and sets: a map, counters, a pipeline and a transaction, WRONGTYPE. */
  static void collections(Jedis r) {
    check(r.hset("h", Map.of("a", "1", "b", "2")) == 2, "HSET");
    check(r.hgetAll("h").equals(Map.of("a", "1", "b", "2")), "HGETALL " + r.hgetAll("h"));
    check(r.hincrBy("h", "a", 5) == 6, "HINCRBY");
    check(r.hdel("h", "b", "zz") == 1, "HDEL");
    check(r.sadd("s", "x", "y", "z") == 3, "SADD");
    check(r.smembers("s").equals(Set.of("x", "y", "z")), "SMEMBERS " + r.smembers("s"));
    check(r.sismember("s", "y"), "SISMEMBER");
    Pipeline p = r.pipelined();
    for (int i = 0; i < 100; i++) {
      p.hset("ph", "f" + i, String.valueOf(i));
      p.sadd("ps", String.valueOf(i));
    }
    Response<Long> hlen = p.hlen("ph");
    Response<Long> scard = p.scard("ps");
    p.sync();
    check(hlen.get() == 100 && scard.get() == 100, "pipeline");
    Transaction t = r.multi();
    t.hset("th", "k", "v");
    t.sadd("ts", "m");
    Response<Map<String, String>> all = t.hgetAll("th");
    t.exec();
    check(all.get().equals(Map.of("k", "v")), "transaction " + all.get());
    check(r.type("ts").equals("set"), "TYPE");
    try {
      r.get("h");
      throw new AssertionError("GET of a hash was accepted");
    } catch (JedisDataException e) {
      check(e.getMessage().startsWith("WRONGTYPE"), e.getMessage());
    }
    r.del("h", "s", "ph", "ps", "th", "ts");
  }

  /**
   * Lists and sorted sets: pushes and pops, ranges, scores, a pipeline, a transaction, and a
   * blocking pop on another connection woken by a push from this one.
   */
  static void listsAndSortedSets(Jedis r, HostAndPort addr, DefaultJedisClientConfig config) {
    check(r.rpush("l", "a", "b", "c") == 3, "RPUSH");
    check(r.lrange("l", 0, -1).equals(List.of("a", "b", "c")), "LRANGE " + r.lrange("l", 0, -1));
    check(r.lpop("l").equals("a"), "LPOP");
    check(r.zadd("z", Map.of("a", 1.0, "b", 2.5, "c", -1.0)) == 3, "ZADD");
    check(r.zrange("z", 0, -1).equals(List.of("c", "a", "b")), "ZRANGE " + r.zrange("z", 0, -1));
    check(r.zscore("z", "b") == 2.5, "ZSCORE");
    check(r.zpopmin("z").getElement().equals("c"), "ZPOPMIN");
    Pipeline p = r.pipelined();
    for (int i = 0; i < 100; i++) {
      p.rpush("pl", String.valueOf(i));
      p.zadd("pz", i, "m" + i);
    }
    Response<Long> llen = p.llen("pl");
    Response<Long> zcard = p.zcard("pz");
    p.sync();
    check(llen.get() == 100 && zcard.get() == 100, "pipeline");
    Transaction t = r.multi();
    t.rpush("tl", "x");
    t.zadd("tz", 1, "m");
    Response<List<String>> all = t.lrange("tl", 0, -1);
    t.exec();
    check(all.get().equals(List.of("x")), "transaction " + all.get());
    check(r.type("tz").equals("zset"), "TYPE");
    try (Jedis waiter = new Jedis(addr, config)) {
      List<List<String>> got = new ArrayList<>();
      Thread th = new Thread(() -> got.add(waiter.blpop(10, "jobs")));
      th.start();
      long deadline = System.currentTimeMillis() + 10000;
      while (!r.info("clients").contains("blocked_clients:1")) {
        check(System.currentTimeMillis() < deadline, "BLPOP never parked");
        try {
          Thread.sleep(10);
        } catch (InterruptedException e) {
          throw new AssertionError(e);
        }
      }
      r.rpush("jobs", "job-1");
      try {
        th.join(10000);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
      check(got.size() == 1 && got.get(0).equals(List.of("jobs", "job-1")), "BLPOP " + got);
    }
    r.del("l", "z", "pl", "pz", "tl", "tz");
  }

  /** Waits up to 10 s for `done`, failing with `what` after. */
  static void await(java.util.function.BooleanSupplier done, String what) {
    long deadline = System.currentTimeMillis() + 10000;
    while (!done.getAsBoolean()) {
      check(System.currentTimeMillis() < deadline, what);
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }
  }

  /**
   * Pub/sub through JedisPubSub on a second connection: a channel, a pattern and a keyspace
   * notification's channel, every message in publish order, PUBLISH's count, and the
   * subscriber's thread returning once it unsubscribes from everything.
   */
  static void pubsub(Jedis r, HostAndPort addr, DefaultJedisClientConfig config) {
    r.configSet("notify-keyspace-events", "K$");
    List<String> got = Collections.synchronizedList(new ArrayList<>());
    JedisPubSub ps =
        new JedisPubSub() {
          @Override
          public void onMessage(String channel, String message) {
            got.add("message " + channel + " " + message);
          }

          @Override
          public void onPMessage(String pattern, String channel, String message) {
            got.add("pmessage " + pattern + " " + channel + " " + message);
          }
        };
    try (Jedis sub = new Jedis(addr, config)) {
      Thread th = new Thread(() -> sub.subscribe(ps, "news"));
      th.start();
      await(() -> ps.getSubscribedChannels() == 1, "SUBSCRIBE never confirmed");
      ps.psubscribe("n*", "__keyspace@0__:jk*");
      await(() -> ps.getSubscribedChannels() == 3, "PSUBSCRIBE never confirmed");
      for (int i = 0; i < 20; i++) check(r.publish("news", "m" + i) == 2, "PUBLISH's count");
      r.set("jk:1", "v");
      await(() -> got.size() == 41, "messages: " + got.size());
      List<String> want = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        want.add("message news m" + i);
        want.add("pmessage n* news m" + i);
      }
      want.add("pmessage __keyspace@0__:jk* __keyspace@0__:jk:1 set");
      check(got.equals(want), "messages " + got);
      ps.unsubscribe();
      ps.punsubscribe();
      try {
        th.join(10000);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
      check(!th.isAlive(), "the subscriber's thread did not return");
    }
    check(r.publish("news", "nobody") == 0, "subscriptions outlived their connection");
    r.configSet("notify-keyspace-events", "");
    r.del("jk:1");
  }

  public static void main(String[] args) {
    String[] addr = System.getenv("ACCELKV_RESP_ADDR").split(":");
    String password = System.getenv("ACCELKV_PASSWORD");
    HostAndPort hp = new HostAndPort(addr[0], Integer.parseInt(addr[1]));
    for (RedisProtocol protocol : new RedisProtocol[] {RedisProtocol.RESP2, RedisProtocol.RESP3}) {
      session(hp, password, protocol);
      System.out.println("Jedis " + protocol + ": ok");
    }
  }
}
