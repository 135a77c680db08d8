// accelkv's RESP session with go-redis v9 (tests/clients/README.md): the same script as every
// client of the matrix, over RESP2 and RESP3. The server's address and password come from
// ACCELKV_RESP_ADDR and ACCELKV_PASSWORD; without them the test is skipped.
package clients

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func session(t *testing.T, addr, password string, protocol int) {
	ctx := context.Background()
	// Without AUTH: refused.
	anon := redis.NewClient(&redis.Options{Addr: addr, Protocol: protocol})
	defer anon.Close()
	if err := anon.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("a command without AUTH: %v", err)
	}
	r := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: protocol})
	defer r.Close()
	if err := r.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Binary values, every byte.
	var blob []byte
	for i := 0; i < 1024; i++ {
		blob = append(blob, byte(i))
	}
	if err := r.Set(ctx, "bin\x00key", blob, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Get(ctx, "bin\x00key").Bytes(); err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("binary value: %v", err)
	}
	if err := r.Get(ctx, "missing").Err(); err != redis.Nil {
		t.Fatalf("missing key: %v", err)
	}
	// A pipeline of 1000.
	p := r.Pipeline()
	for i := 0; i < 1000; i++ {
		p.Set(ctx, fmt.Sprintf("p:%04d", i), i, 0)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	gets := make([]*redis.StringCmd, 1000)
	for i := range gets {
		gets[i] = p.Get(ctx, fmt.Sprintf("p:%04d", i))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, g := range gets {
		if g.Val() != fmt.Sprint(i) {
			t.Fatalf("pipelined GET %d: %q", i, g.Val())
		}
	}
	// SCAN over 10,000 keys against the set written.
	written := map[string]bool{}
	var batch []interface{}
	for i := 0; i < 10000; i++ {
		k := fmt.Sprintf("s:%05d", i)
		written[k] = true
		batch = append(batch, k, "v")
		if len(batch) == 2000 {
			if err := r.MSet(ctx, batch...).Err(); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	seen := map[string]bool{}
	iter := r.Scan(ctx, 0, "s:*", 500).Iterator()
	for iter.Next(ctx) {
		if seen[iter.Val()] {
			t.Fatalf("SCAN returned %s twice", iter.Val())
		}
		seen[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seen, written) {
		t.Fatalf("SCAN found %d keys of %d", len(seen), len(written))
	}
	// Counters, MGET, DEL.
	if n := r.IncrBy(ctx, "n", 42).Val(); n != 42 {
		t.Fatalf("INCRBY: %d", n)
	}
	if v := r.MGet(ctx, "n", "missing").Val(); !reflect.DeepEqual(v, []interface{}{"42", nil}) {
		t.Fatalf("MGET: %#v", v)
	}
	if n := r.Del(ctx, "n", "missing").Val(); n != 1 {
		t.Fatalf("DEL: %d", n)
	}
	// MULTI/EXEC.
	var incr *redis.IntCmd
	if _, err := r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, "tx:a", 1, 0)
		incr = p.Incr(ctx, "tx:a")
		return nil
	}); err != nil || incr.Val() != 2 {
		t.Fatalf("MULTI/EXEC: %v %d", err, incr.Val())
	}
	// WATCH: a change by another connection makes EXEC fail.
	other := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: protocol})
	defer other.Close()
	err := r.Watch(ctx, func(tx *redis.Tx) error {
		if err := other.Set(ctx, "tx:a", "changed", 0).Err(); err != nil {
			return err
		}
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "tx:a", "mine", 0)
			return nil
		})
		return err
	}, "tx:a")
	if err != redis.TxFailedErr {
		t.Fatalf("WATCH conflict: %v", err)
	}
	if v := r.Get(ctx, "tx:a").Val(); v != "changed" {
		t.Fatalf("after the WATCH conflict: %q", v)
	}
	if err := r.Watch(ctx, func(tx *redis.Tx) error {
		_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "tx:a", "mine", 0)
			return nil
		})
		return err
	}, "tx:a"); err != nil {
		t.Fatalf("WATCH without conflict: %v", err)
	}
	// Expiry: EXPIRE, then TTL, then the key observed gone; SET with a TTL and PERSIST.
	r.Set(ctx, "ttl:a", "v", 0)
	if ok := r.Expire(ctx, "ttl:a", 100*time.Second).Val(); !ok {
		t.Fatalf("EXPIRE")
	}
	if d := r.TTL(ctx, "ttl:a").Val(); d < 99*time.Second || d > 100*time.Second {
		t.Fatalf("TTL: %v", d)
	}
	r.PExpire(ctx, "ttl:a", 300*time.Millisecond)
	if d := r.PTTL(ctx, "ttl:a").Val(); d <= 0 || d > 300*time.Millisecond {
		t.Fatalf("PTTL: %v", d)
	}
	r.Set(ctx, "ttl:b", "v", 100*time.Second)
	if ok := r.Persist(ctx, "ttl:b").Val(); !ok || r.TTL(ctx, "ttl:b").Val() != -1 {
		t.Fatalf("PERSIST")
	}
	if d := r.TTL(ctx, "ttl:missing").Val(); d != -2 {
		t.Fatalf("TTL of a missing key: %v", d)
	}
	time.Sleep(400 * time.Millisecond)
	if err := r.Get(ctx, "ttl:a").Err(); err != redis.Nil {
		t.Fatalf("GET after expiry: %v", err)
	}
	if n := r.Exists(ctx, "ttl:a").Val(); n != 0 {
		t.Fatalf("EXISTS after expiry: %d", n)
	}
	r.Del(ctx, "ttl:b")
	// Wrong arguments: Redis's error.
	err = r.Do(ctx, "GET", "a", "b").Err()
	if err == nil || !strings.Contains(err.Error(), "wrong number of arguments for 'get' command") {
		t.Fatalf("GET with two keys: %v", err)
	}
	collections(t, ctx, r)
	listsAndSortedSets(t, ctx, r, addr, password, protocol)
	pubsub(t, ctx, r, addr, password, protocol)
	// The ordered RANGE through the generic command call.
	got, err := r.Do(ctx, "RANGE", "p:0010", "p:0013").StringSlice()
	want := []string{"p:0010", "10", "p:0011", "11", "p:0012", "12"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("RANGE: %v %v", got, err)
	}
	if err := r.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// Hashes and sets: a map, counters, a pipeline and a transaction, WRONGTYPE.
func collections(t *testing.T, ctx context.Context, r *redis.Client) {
	if n := r.HSet(ctx, "h", map[string]interface{}{"a": "1", "b": "2"}).Val(); n != 2 {
		t.Fatalf("HSET: %d", n)
	}
	if m := r.HGetAll(ctx, "h").Val(); !reflect.DeepEqual(m, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("HGETALL: %v", m)
	}
	if n := r.HIncrBy(ctx, "h", "a", 5).Val(); n != 6 {
		t.Fatalf("HINCRBY: %d", n)
	}
	if n, err := r.HDel(ctx, "h", "b", "zz").Result(); n != 1 || err != nil {
		t.Fatalf("HDEL: %d %v", n, err)
	}
	if n := r.SAdd(ctx, "s", "x", "y", "z").Val(); n != 3 {
		t.Fatalf("SADD: %d", n)
	}
	if ok := r.SIsMember(ctx, "s", "y").Val(); !ok {
		t.Fatalf("SISMEMBER")
	}
	if m := r.SMembersMap(ctx, "s").Val(); len(m) != 3 {
		t.Fatalf("SMEMBERS: %v", m)
	}
	cmds, err := r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 100; i++ {
			p.HSet(ctx, "ph", fmt.Sprintf("f%d", i), i)
			p.SAdd(ctx, "ps", i)
		}
		p.HLen(ctx, "ph")
		p.SCard(ctx, "ps")
		return nil
	})
	if err != nil || cmds[200].(*redis.IntCmd).Val() != 100 || cmds[201].(*redis.IntCmd).Val() != 100 {
		t.Fatalf("pipeline: %v", err)
	}
	var all *redis.MapStringStringCmd
	if _, err := r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, "th", "k", "v")
		p.SAdd(ctx, "ts", "m")
		all = p.HGetAll(ctx, "th")
		return nil
	}); err != nil || !reflect.DeepEqual(all.Val(), map[string]string{"k": "v"}) {
		t.Fatalf("transaction: %v %v", err, all.Val())
	}
	if ty := r.Type(ctx, "ts").Val(); ty != "set" {
		t.Fatalf("TYPE: %s", ty)
	}
	if err := r.Get(ctx, "h").Err(); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("GET of a hash: %v", err)
	}
	r.Del(ctx, "h", "s", "ph", "ps", "th", "ts")
}

// Lists and sorted sets: pushes and pops, ranges, scores, a pipeline, a transaction, and a
// blocking pop on one connection woken by another connection's push.
func listsAndSortedSets(t *testing.T, ctx context.Context, r *redis.Client, addr, password string, protocol int) {
	if n := r.RPush(ctx, "l", "a", "b", "c").Val(); n != 3 {
		t.Fatalf("RPUSH: %d", n)
	}
	if got := r.LRange(ctx, "l", 0, -1).Val(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("LRANGE: %v", got)
	}
	if got := r.LPop(ctx, "l").Val(); got != "a" {
		t.Fatalf("LPOP: %v", got)
	}
	if n := r.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2.5, Member: "b"}, redis.Z{Score: -1, Member: "c"}).Val(); n != 3 {
		t.Fatalf("ZADD: %d", n)
	}
	want := []redis.Z{{Score: -1, Member: "c"}, {Score: 1, Member: "a"}, {Score: 2.5, Member: "b"}}
	if got := r.ZRangeWithScores(ctx, "z", 0, -1).Val(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ZRANGE WITHSCORES: %v", got)
	}
	if sc := r.ZScore(ctx, "z", "b").Val(); sc != 2.5 {
		t.Fatalf("ZSCORE: %v", sc)
	}
	if got := r.ZPopMin(ctx, "z").Val(); len(got) != 1 || got[0].Member != "c" || got[0].Score != -1 {
		t.Fatalf("ZPOPMIN: %v", got)
	}
	cmds, err := r.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 100; i++ {
			p.RPush(ctx, "pl", i)
			p.ZAdd(ctx, "pz", redis.Z{Score: float64(i), Member: i})
		}
		p.LLen(ctx, "pl")
		p.ZCard(ctx, "pz")
		return nil
	})
	if err != nil || cmds[200].(*redis.IntCmd).Val() != 100 || cmds[201].(*redis.IntCmd).Val() != 100 {
		t.Fatalf("pipeline: %v", err)
	}
	var rng *redis.StringSliceCmd
	if _, err := r.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, "tl", "x")
		p.ZAdd(ctx, "tz", redis.Z{Score: 1, Member: "m"})
		rng = p.LRange(ctx, "tl", 0, -1)
		return nil
	}); err != nil || !reflect.DeepEqual(rng.Val(), []string{"x"}) {
		t.Fatalf("transaction: %v %v", err, rng.Val())
	}
	if ty := r.Type(ctx, "tz").Val(); ty != "zset" {
		t.Fatalf("TYPE: %s", ty)
	}
	// A blocking pop, woken by a push from this connection while another waits.
	waiter := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: protocol})
	defer waiter.Close()
	done := make(chan []string, 1)
	go func() { done <- waiter.BLPop(ctx, 10*time.Second, "jobs").Val() }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.Info(ctx, "clients").Val(), "blocked_clients:1") {
		if time.Now().After(deadline) {
			t.Fatalf("BLPOP never parked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.RPush(ctx, "jobs", "job-1")
	if got := <-done; !reflect.DeepEqual(got, []string{"jobs", "job-1"}) {
		t.Fatalf("BLPOP: %v", got)
	}
	r.Del(ctx, "l", "z", "pl", "pz", "tl", "tz")
}

// pubsub: a channel and a pattern on a second connection (go-redis's PubSub), every
// message once per subscription, in publish order.
func pubsub(t *testing.T, ctx context.Context, r *redis.Client, addr, password string, protocol int) {
	sub := redis.NewClient(&redis.Options{Addr: addr, Password: password, Protocol: protocol})
	defer sub.Close()
	ps := sub.Subscribe(ctx, "news")
	defer ps.Close()
	if err := ps.PSubscribe(ctx, "n*"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
			t.Fatalf("subscription confirmation: %v", err)
		}
	}
	const n = 20
	for i := 0; i < n; i++ {
		if got := r.Publish(ctx, "news", fmt.Sprintf("m%d", i)).Val(); got != 2 {
			t.Fatalf("PUBLISH reached %d, want 2", got)
		}
	}
	for i := 0; i < n; i++ {
		for _, pattern := range []string{"", "n*"} {
			m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			msg, ok := m.(*redis.Message)
			want := fmt.Sprintf("m%d", i)
			if !ok || msg.Channel != "news" || msg.Pattern != pattern || msg.Payload != want {
				t.Fatalf("message %d: %#v", i, m)
			}
		}
	}
}

func TestSession(t *testing.T) {
	addr, password := os.Getenv("ACCELKV_RESP_ADDR"), os.Getenv("ACCELKV_PASSWORD")
	if addr == "" {
		t.Skip("ACCELKV_RESP_ADDR is not set (server/tests/clients.rs sets it)")
	}
	for _, protocol := range []int{2, 3} {
		session(t, addr, password, protocol)
		t.Logf("go-redis RESP%d: ok", protocol)
	}
}
