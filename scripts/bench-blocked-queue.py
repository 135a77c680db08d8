#!/usr/bin/env python3
# Blocked consumers drained by a producer (docs/BENCHMARKS.md, "DUMP of streams, blocked
# clients in order"): 4 processes loop BLPOP on one list while redis-benchmark pushes 100,000
# elements over 2 connections; elements taken per second on each server, run one after the
# other. The consumers are redis-py processes: they bound the rate on a 2-vCPU machine.
# Usage: scripts/bench-blocked-queue.py ACCELKV_PORT REDIS_PORT
import redis, sys, time, multiprocessing as mp, subprocess
N=100000
def consume(port, q, stop_at):
    r=redis.Redis(port=port); n=0
    while True:
        v=r.blpop('q', timeout=1)
        if v is None: break
        n+=1
    q.put(n)
def run(port):
    r=redis.Redis(port=port); r.delete('q')
    q=mp.Queue(); ps=[mp.Process(target=consume,args=(port,q,0)) for _ in range(4)]
    for p in ps: p.start()
    time.sleep(0.5)
    t=time.perf_counter()
    subprocess.run(['redis-benchmark','-p',str(port),'-n',str(N),'-c','2','-P','1','-q','LPUSH','q','x'],stdout=subprocess.DEVNULL)
    while r.llen('q')>0: time.sleep(0.01)
    el=time.perf_counter()-t
    tot=sum(q.get() for _ in ps)
    for p in ps: p.join()
    return tot, el
for name,port in (('accelkv',int(sys.argv[1])),('redis',int(sys.argv[2]))):
    tot,el=run(port); print(f"{name}: {tot} taken in {el:.2f} s: {tot/el:,.0f}/s")
