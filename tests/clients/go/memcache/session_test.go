// accelkv's memcached port with gomemcache (tests/clients/README.md): set/get with flags,
// gets and a CAS conflict, incr/decr, append/prepend, touch and expiry, delete, flush_all,
// and a multi-get of 100 keys.
//
//	ACCELKV_MEMCACHED_ADDR=127.0.0.1:11211 go test ./memcache/
package memcache_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

func TestMemcachedSession(t *testing.T) {
	addr := os.Getenv("ACCELKV_MEMCACHED_ADDR")
	if addr == "" {
		t.Skip("ACCELKV_MEMCACHED_ADDR not set")
	}
	c := memcache.New(addr)
	c.Timeout = 5 * time.Second
	other := memcache.New(addr)
	other.Timeout = 5 * time.Second
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// set/get with flags, every byte
	value := make([]byte, 256)
	for i := range value {
		value[i] = byte(i)
	}
	must(c.Set(&memcache.Item{Key: "bin", Value: value, Flags: 42}))
	it, err := c.Get("bin")
	must(err)
	if !bytes.Equal(it.Value, value) || it.Flags != 42 {
		t.Fatalf("get bin: %v flags %d", it.Value, it.Flags)
	}
	if _, err := c.Get("missing"); err != memcache.ErrCacheMiss {
		t.Fatalf("missing: %v", err)
	}

	// CAS: a stale item loses
	must(c.Set(&memcache.Item{Key: "k", Value: []byte("one")}))
	mine, err := c.Get("k")
	must(err)
	theirs, err := other.Get("k")
	must(err)
	theirs.Value = []byte("two")
	must(other.CompareAndSwap(theirs))
	mine.Value = []byte("three")
	if err := c.CompareAndSwap(mine); err != memcache.ErrCASConflict {
		t.Fatalf("stale CAS: %v", err)
	}
	if it, _ := c.Get("k"); string(it.Value) != "two" {
		t.Fatalf("k = %q", it.Value)
	}

	// add / replace
	if err := c.Add(&memcache.Item{Key: "k", Value: []byte("x")}); err != memcache.ErrNotStored {
		t.Fatalf("add existing: %v", err)
	}
	if err := c.Replace(&memcache.Item{Key: "absent", Value: []byte("x")}); err != memcache.ErrNotStored {
		t.Fatalf("replace absent: %v", err)
	}

	// incr/decr
	must(c.Set(&memcache.Item{Key: "n", Value: []byte("10")}))
	if n, err := c.Increment("n", 5); err != nil || n != 15 {
		t.Fatalf("incr: %d %v", n, err)
	}
	if n, err := c.Decrement("n", 100); err != nil || n != 0 {
		t.Fatalf("decr: %d %v", n, err)
	}
	must(c.Set(&memcache.Item{Key: "max", Value: []byte("18446744073709551615")}))
	if n, err := c.Increment("max", 2); err != nil || n != 1 {
		t.Fatalf("incr wraps: %d %v", n, err)
	}
	if _, err := c.Increment("absent", 1); err != memcache.ErrCacheMiss {
		t.Fatalf("incr absent: %v", err)
	}

	// append / prepend keep the flags
	must(c.Set(&memcache.Item{Key: "s", Value: []byte("mid"), Flags: 3}))
	must(c.Append(&memcache.Item{Key: "s", Value: []byte("-end")}))
	must(c.Prepend(&memcache.Item{Key: "s", Value: []byte("start-")}))
	if it, _ := c.Get("s"); string(it.Value) != "start-mid-end" || it.Flags != 3 {
		t.Fatalf("s = %q flags %d", it.Value, it.Flags)
	}

	// touch and expiry
	must(c.Set(&memcache.Item{Key: "short", Value: []byte("x"), Expiration: 1}))
	must(c.Set(&memcache.Item{Key: "long", Value: []byte("y"), Expiration: 100}))
	must(c.Touch("long", 1))
	if err := c.Touch("absent", 10); err != memcache.ErrCacheMiss {
		t.Fatalf("touch absent: %v", err)
	}
	time.Sleep(2200 * time.Millisecond)
	for _, k := range []string{"short", "long"} {
		if _, err := c.Get(k); err != memcache.ErrCacheMiss {
			t.Fatalf("%s after expiry: %v", k, err)
		}
	}

	// delete
	must(c.Set(&memcache.Item{Key: "d", Value: []byte("x")}))
	must(c.Delete("d"))
	if err := c.Delete("d"); err != memcache.ErrCacheMiss {
		t.Fatalf("delete again: %v", err)
	}

	// multi-get of 100 keys
	keys := make([]string, 0, 102)
	for i := 0; i < 100; i++ {
		k := fmt.Sprintf("key%d", i)
		keys = append(keys, k)
		must(c.Set(&memcache.Item{Key: k, Value: []byte(fmt.Sprintf("value%d", i)), Flags: uint32(i)}))
	}
	keys = append(keys, "absent1", "absent2")
	got, err := c.GetMulti(keys)
	must(err)
	if len(got) != 100 {
		t.Fatalf("GetMulti: %d items", len(got))
	}
	for i := 0; i < 100; i++ {
		it := got[fmt.Sprintf("key%d", i)]
		if it == nil || string(it.Value) != fmt.Sprintf("value%d", i) || it.Flags != uint32(i) {
			t.Fatalf("key%d: %+v", i, it)
		}
	}

	// flush_all
	must(c.FlushAll())
	if _, err := c.Get("key1"); err != memcache.ErrCacheMiss {
		t.Fatalf("after flush_all: %v", err)
	}
	must(c.Ping())
}
