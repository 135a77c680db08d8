// JedisCluster against accelkv answering as a Redis Cluster: one server in emulated cluster
// mode (`--cluster-mode emulated`), or a cluster in slot mode (`--slots redis`,
// docs/CLUSTER.md; ACCELKV_CLUSTER_NODES: how many nodes it finds, default 1): it discovers the slots, then strings across slots, a hash, a
// sorted set, a list with a blocking pop woken by a push from another thread, a pipeline
// and a transaction over one hash tag, and a multi-key command over two slots refused. The
// address comes from ACCELKV_CLUSTER_ADDR.
package dev.accelkv;

import java.util.List;
import java.util.Map;
import java.util.Set;
import redis.clients.jedis.ClusterPipeline;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.Response;
import redis.clients.jedis.exceptions.JedisException;

public final class ClusterSession {
  static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  public static void main(String[] args) throws Exception {
    String[] hp = System.getenv("ACCELKV_CLUSTER_ADDR").split(":");
    HostAndPort addr = new HostAndPort(hp[0], Integer.parseInt(hp[1]));
    try (JedisCluster c = new JedisCluster(Set.of(addr))) {
      String want = System.getenv().getOrDefault("ACCELKV_CLUSTER_NODES", "1");
      check(c.getClusterNodes().size() == Integer.parseInt(want),
          want + " nodes: " + c.getClusterNodes().keySet());
      for (int i = 0; i < 200; i++) c.set("k" + i, String.valueOf(i));
      for (int i = 0; i < 200; i++) check(c.get("k" + i).equals(String.valueOf(i)), "k" + i);
      c.hset("h", Map.of("a", "1", "b", "2"));
      check(c.hincrBy("h", "a", 10) == 11, "HINCRBY");
      c.zadd("z", 1.5, "x");
      c.zadd("z", 0.5, "y");
      check(c.zrange("z", 0, -1).equals(List.of("y", "x")), "ZRANGE");
      // A blocking pop woken by a push from another thread.
      Thread pusher = new Thread(() -> {
        try {
          Thread.sleep(200);
        } catch (InterruptedException e) {
          return;
        }
        c.rpush("{q}jobs", "job1");
      });
      pusher.start();
      List<String> popped = c.blpop(5, "{q}jobs");
      pusher.join();
      check(popped != null && popped.get(1).equals("job1"), "BLPOP " + popped);
      // A pipeline over one hash tag.
      try (ClusterPipeline p = c.pipelined()) {
        for (int i = 0; i < 100; i++) p.set("{tag}p" + i, String.valueOf(i));
        Response<String> seven = p.get("{tag}p7");
        p.sync();
        check(seven.get().equals("7"), "pipeline");
      }
      // MSET and MGET over one hash tag run; over two slots they are refused.
      c.mset("{tag}a", "1", "{tag}b", "2");
      check(c.mget("{tag}a", "{tag}b").equals(List.of("1", "2")), "MGET");
      try {
        c.mset("{tag}a", "1", "other", "2");
        throw new AssertionError("MSET over two slots was accepted");
      } catch (JedisException e) {
        String m = String.valueOf(e.getMessage());
        check(m.contains("CROSSSLOT") || m.toLowerCase().contains("slot"), m);
      }
    }
    System.out.println("JedisCluster: ok");
  }
}
