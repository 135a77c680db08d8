// YCSB B, C, D and Honeycomb's cloud-storage workload inside Masstree's own test driver
// (mttest), for docs/EVALUATION.md's side-by-side runs. This file is accelkv's; it is
// compiled in a scratch checkout of kohler/masstree-beta by scripts/masstree-ycsb.sh, which
// includes it from mttest.cc and registers the `ycsb` test. Nothing of Masstree is vendored.
//
// The same shapes as accelkv-bench's `small` records: 16-byte keys ("user" and 12 digits of
// the key number's FNV hash) and 16-byte values; YCSB's scrambled Zipfian (θ = 0.99 over
// 10^10 items, hashed) or uniform key choice; D reads the newest records (YCSB's skewed
// latest) and inserts; cloud<P> scans 3–4 items P% of the time and inserts otherwise.
// Parameters (mttest's name=value arguments): records=1000000, secs=5, mix=b|c|d|cloud50|
// cloud90|cloud100, dist=uniform|zipfian, keylen=16 (16..255: the key, then 'x' bytes),
// scanlen=0 (items per scan; 0: 3 or 4). Every thread loads its share of the records,
// waits for the others, then runs the mix for `secs`; mttest sums the threads' ops_per_sec.
#include <atomic>
#include <chrono>
#include <cmath>

namespace akv_ycsb {

inline uint64_t fnv64(uint64_t v) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (int i = 0; i < 8; ++i) {
        h ^= v & 0xff;
        v >>= 8;
        h *= 1099511628211ULL;
    }
    int64_t s = (int64_t) h;
    return (uint64_t) (s < 0 ? -s : s);
}

// "user" and 12 decimal digits, written digit by digit as core_ycsb.rs's Key::of does (the
// loop's key formatting costs the same on both sides: snprintf took about 1,000
// instructions a key, more than Masstree's GET itself).
inline void key_of(uint64_t n, char* k, int len) {
    memcpy(k, "user", 4);
    uint64_t h = fnv64(n) % 1000000000000ULL;
    for (int i = 15; i >= 4; --i) {
        k[i] = '0' + (char) (h % 10);
        h /= 10;
    }
    memset(k + 16, 'x', len - 16);
}

// YCSB's ZipfianGenerator over `items` items with `zetan` given.
struct zipf {
    double items, theta, zetan, alpha, eta, half;
    zipf(double n, double zn) : items(n), theta(0.99), zetan(zn) {
        double zeta2 = 1.0 + std::pow(0.5, theta);
        alpha = 1.0 / (1.0 - theta);
        eta = (1.0 - std::pow(2.0 / n, 1.0 - theta)) / (1.0 - zeta2 / zetan);
        half = 1.0 + std::pow(0.5, theta);
    }
    uint64_t next(double u) const {
        double uz = u * zetan;
        if (uz < 1.0) return 0;
        if (uz < half) return 1;
        return (uint64_t) (items * std::pow(eta * u - eta + 1.0, alpha));
    }
};

inline double zeta(uint64_t n) {
    double s = 0;
    for (uint64_t i = 1; i <= n; ++i) s += 1.0 / std::pow((double) i, 0.99);
    return s;
}

static std::atomic<int> loaded(0);
static std::atomic<uint64_t> inserted(0);

}  // namespace akv_ycsb

template <typename C>
void kvtest_ycsb(C& client) {
    using namespace akv_ycsb;
    const uint64_t records = client.param("records", 1000000).to_u64();
    const double secs = client.param("secs", 5).to_d();
    const String mix = client.param("mix", "c").to_s();
    const bool zipfian = client.param("dist", "zipfian").to_s() == "zipfian";
    const int threads = client.nthreads(), me = client.id();
    const int kl = std::max(16, std::min(255, (int) client.param("keylen", 16).to_i()));
    const int scanlen = client.param("scanlen", 0).to_i();
    // ops=N runs exactly N operations instead of `secs` (instruction counts: callgrind of two
    // runs that differ only here gives the cost per operation, the load cancelled).
    const uint64_t maxops = client.param("ops", 0).to_u64();
    char key[272], val[17];
    memset(val, 'v', 16);
    val[16] = 0;
    for (uint64_t n = me; n < records; n += threads) {
        key_of(n, key, kl);
        client.put(Str(key, kl), Str(val, 16));
    }
    client.wait_all();
    if (me == 0) inserted.store(records);
    loaded.fetch_add(1);
    while (loaded.load() < threads) client.rcu_quiesce();

    double read = 1.0, scan = 0.0;  // the rest updates (b) or inserts (d, cloud)
    bool latest = false, inserts = false;
    if (mix == "b") read = 0.95;
    else if (mix == "d") { read = 0.95; latest = true; inserts = true; }
    else if (mix.length() > 5 && memcmp(mix.c_str(), "cloud", 5) == 0) {
        read = 0; scan = atoi(mix.c_str() + 5) / 100.0; inserts = true;
    }
    zipf scrambled(1e10, 26.46902820178302);
    zipf recent((double) records, zeta(latest ? records : 1));
    client.rand.seed(kvtest_first_seed + me);
    auto u01 = [&] { return (client.rand() >> 1) / 2147483648.0; };
    auto existing = [&](uint64_t last) -> uint64_t {
        if (latest) return last - std::min(last, recent.next(u01()));
        if (zipfian) return fnv64(scrambled.next(u01())) % last;
        return ((uint64_t) client.rand() << 31 ^ client.rand()) % last;
    };
    std::vector<Str> ks, vs;
    uint64_t ops = 0, found = 0;
    auto t0 = std::chrono::steady_clock::now();
    double t = 0;
    while (maxops ? ops < maxops : t < secs) {
        for (int i = 0; i < 256 && (!maxops || ops < maxops); ++i, ++ops) {
            double u = u01();
            uint64_t last = inserted.load(std::memory_order_relaxed);
            if (u < read) {
                key_of(existing(last), key, kl);
                found += client.get_sync(Str(key, kl));
            } else if (u < read + scan) {
                key_of(existing(last), key, kl);
                client.scan_sync(Str(key, kl), scanlen ? scanlen : 3 + (client.rand() & 1), ks, vs);
                found += !ks.empty();
            } else if (inserts) {
                key_of(inserted.fetch_add(1), key, kl);
                client.put(Str(key, kl), Str(val, 16));
            } else {
                key_of(existing(last), key, kl);
                client.put(Str(key, kl), Str(val, 16));
            }
        }
        client.rcu_quiesce();
        t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    Json result = Json().set("found", found);
    kvtest_set_time(result, "ops", ops, t);
    client.report(result);
}
