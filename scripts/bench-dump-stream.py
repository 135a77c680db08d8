#!/usr/bin/env python3
# DUMP and RESTORE of one stream with a group (docs/BENCHMARKS.md, "DUMP of streams, blocked
# clients in order"): 10,000 entries of two fields, 2,000 pending over two consumers;
# milliseconds per DUMP and per RESTORE REPLACE (50 of each) and the payload size.
# Usage: scripts/bench-dump-stream.py ACCELKV_PORT REDIS_PORT
import redis, time, sys
def fill(c):
    c.flushall()
    c.xgroup_create('s','g','$',mkstream=True)
    p=c.pipeline(transaction=False)
    for i in range(1,10001):
        p.xadd('s',{'field':str(i),'payload':'x'*32}, id=f'{i}-0')
    p.execute()
    c.xreadgroup('g','alice',{'s':'>'},count=1000)
    c.xreadgroup('g','bob',{'s':'>'},count=1000)
def bench(c, n=50):
    d=c.dump('s'); t=time.perf_counter()
    for _ in range(n): c.dump('s')
    td=(time.perf_counter()-t)/n*1000
    t=time.perf_counter()
    for i in range(n): c.restore('t',0,d,replace=True)
    tr=(time.perf_counter()-t)/n*1000
    return td, tr, len(d)
for name,port in (('accelkv',int(sys.argv[1])),('redis',int(sys.argv[2]))):
    c=redis.Redis(port=port); fill(c); td,tr,n=bench(c)
    print(f"{name}: DUMP {td:.2f} ms, RESTORE {tr:.2f} ms, payload {n} bytes")
