// go-redis's ClusterClient against accelkv answering as a Redis Cluster: one server in
// emulated cluster mode (`--cluster-mode emulated`) or a cluster in slot mode (`--slots
// redis`, docs/CLUSTER.md): it loads the slots (CLUSTER SLOTS, every slot covered), then
// strings across slots, a hash, a sorted set, a list with a blocking pop woken by a push
// from another client, a pipeline and a transaction over one hash tag, and a multi-key
// command over two slots refused with CROSSSLOT. The address comes from
// ACCELKV_CLUSTER_ADDR; without it the test is skipped.
package clients

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestCluster(t *testing.T) {
	addr := os.Getenv("ACCELKV_CLUSTER_ADDR")
	if addr == "" {
		t.Skip("ACCELKV_CLUSTER_ADDR not set")
	}
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	defer c.Close()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	// Every slot covered once (one run in emulated mode, a run per range in slot mode).
	sort.Slice(slots, func(i, j int) bool { return slots[i].Start < slots[j].Start })
	next := 0
	for _, s := range slots {
		if s.Start != next || s.End < s.Start || len(s.Nodes) == 0 {
			t.Fatalf("CLUSTER SLOTS: %v", slots)
		}
		next = s.End + 1
	}
	if next != 16384 {
		t.Fatalf("CLUSTER SLOTS does not cover every slot: %v", slots)
	}
	for i := 0; i < 200; i++ {
		if err := c.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ {
		if v, err := c.Get(ctx, fmt.Sprintf("k%d", i)).Int(); err != nil || v != i {
			t.Fatalf("k%d: %v %v", i, v, err)
		}
	}
	c.HSet(ctx, "h", "a", "1", "b", "2")
	if n, err := c.HIncrBy(ctx, "h", "a", 10).Result(); err != nil || n != 11 {
		t.Fatalf("HINCRBY: %v %v", n, err)
	}
	c.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "x"}, redis.Z{Score: 0.5, Member: "y"})
	if zs, err := c.ZRange(ctx, "z", 0, -1).Result(); err != nil || strings.Join(zs, ",") != "y,x" {
		t.Fatalf("ZRANGE: %v %v", zs, err)
	}
	// A blocking pop woken by another client's push.
	other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	defer other.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		other.RPush(ctx, "{q}jobs", "job1")
	}()
	if v, err := c.BLPop(ctx, 5*time.Second, "{q}jobs").Result(); err != nil || v[1] != "job1" {
		t.Fatalf("BLPOP: %v %v", v, err)
	}
	// A pipeline and a transaction over one hash tag.
	p := c.Pipeline()
	for i := 0; i < 100; i++ {
		p.Set(ctx, fmt.Sprintf("{tag}p%d", i), i, 0)
	}
	get := p.Get(ctx, "{tag}p7")
	if _, err := p.Exec(ctx); err != nil || get.Val() != "7" {
		t.Fatalf("pipeline: %v %v", get.Val(), err)
	}
	tx := c.TxPipeline()
	tx.Set(ctx, "{tag}a", "1", 0)
	incr := tx.Incr(ctx, "{tag}n")
	mget := tx.MGet(ctx, "{tag}a", "{tag}n")
	if _, err := tx.Exec(ctx); err != nil || incr.Val() != 1 || fmt.Sprint(mget.Val()) != "[1 1]" {
		t.Fatalf("transaction: %v %v %v", incr.Val(), mget.Val(), err)
	}
	// Keys of two slots in one command: the server refuses it as a cluster does.
	err = c.Do(ctx, "MSET", "{tag}x", "1", "other", "2").Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET over two slots: %v", err)
	}
}
