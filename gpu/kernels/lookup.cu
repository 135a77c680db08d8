/* accelkv GPU engine kernels: batched GET, SCAN and SCAN_FLOOR over the tree's node bytes
 * (docs/FORMAT.md), read zero-copy from pinned host memory across PCIe, with interior nodes
 * served from a device-memory cache. Compiled at run time by NVRTC (gpu/src/kernels.rs);
 * the same source compiles as C++ on the host for the engine's host emulation
 * (gpu/kernels/host_emu.cpp), which the tests run against the reference reader.
 *
 * One request per group of AKV_GROUP lanes. The lanes of a group walk the same node bytes
 * (the same addresses: one memory transaction for all of them) and split two steps:
 *  - the shortcut search: each lane compares one boundary key, a ballot picks the segment;
 *  - fetches from host memory: each lane copies 16-byte pieces of the range a step needs
 *    (the shortcut block, then only the chosen segment and the log block) into the group's
 *    stage in shared memory.
 * Lane 0 writes the request's output.
 *
 * Consistency: a request resolves every LID through the device page table (kept current by
 * akv_apply before the batch runs) and follows old-version pointers until the node's
 * version is <= its read version; log entries newer than that are ignored; bytes of a node
 * are read only below the `used` its header word published (acquire, system scope). */
#ifndef AKV_BATCH_H
#include "akv_batch.h"
#endif

#ifdef __CUDACC__
#define AKV_DEV __device__ __forceinline__
#define AKV_NOINLINE __device__ __noinline__
#else
#include <string.h>
#define AKV_DEV static inline
#define AKV_NOINLINE static
#endif

#ifndef AKV_GROUP
#define AKV_GROUP 8
#endif
#define AKV_GMASK ((AKV_GROUP) >= 32 ? 0xffffffffu : ((1u << (AKV_GROUP)) - 1u))

/* Node layout (docs/FORMAT.md; node/src/layout.rs). */
#define N_VERSION 16
#define N_OLD 24
#define N_LINK 32
#define N_KIND 38
#define N_SORTED_END 40
#define N_SORTED_START 44
#define N_NSC 46
#define N_HEADER 48
#define KIND_LEAF 0x4C
#define KIND_INTERIOR 0x49
#define NO_BUFFER 0xFFFFFFFFFFFFFFFFull
#define KEY_LEN_MASK 0x01FF
#define F_TOMB 0x8000
#define F_EQ 0x4000
#define F_DUP 0x2000
#define V_OOL 0x8000
#define V_EXPIRES 0x4000 /* a u64 deadline (ms since the Unix epoch) follows the header */
#define V_FLAGS 0x2000   /* u32 client flags follow (after the deadline) */
#define V_LEN_MASK 0x1FFF
#define LOG_HDR 8
#define MAX_LOG 255
#define MAX_KEY 460
#define MAX_DEPTH 64

/* Everything the kernels read besides the batch: the device copy of the page table, the
 * interior-node cache, and where the arena's chunks are mapped. */
struct akv_tables {
    const akv_u64 *pt;      /* LID -> arena offset */
    const akv_u32 *cslot;   /* LID -> interior-cache slot + 1 (0: not cached) */
    const akv_u8 *cache;    /* slots of node_size bytes */
    const akv_u64 *chunks;  /* chunk index -> device address of the mapped chunk */
    akv_u64 pt_len;
    akv_u32 chunk_shift;
    akv_u32 node_size;
    akv_u32 head_cap;       /* stage bytes for the header and shortcut block */
    akv_u32 seg_cap;        /* stage bytes for a segment */
    akv_u32 log_cap;        /* stage bytes for the log block */
    akv_u32 stage;          /* stage bytes per group (the three, rounded to 16) */
};

typedef const volatile akv_u8 *nptr;

AKV_DEV akv_u32 rd8(nptr p, akv_u32 o) { return p[o]; }
AKV_DEV akv_u32 rd16(nptr p, akv_u32 o) { return (akv_u32)p[o] | ((akv_u32)p[o + 1] << 8); }
AKV_DEV akv_u32 rd32(nptr p, akv_u32 o) { return rd16(p, o) | (rd16(p, o + 2) << 16); }
AKV_DEV akv_u64 rd64(nptr p, akv_u32 o) { return (akv_u64)rd32(p, o) | ((akv_u64)rd32(p, o + 4) << 32); }
AKV_DEV akv_u64 rd48(nptr p, akv_u32 o) { return (akv_u64)rd32(p, o) | ((akv_u64)rd16(p, o + 4) << 32); }
AKV_DEV akv_u64 rd40(nptr p, akv_u32 o) { return (akv_u64)rd32(p, o) | ((akv_u64)rd8(p, o + 4) << 32); }

/* memcmp order, then length. */
AKV_DEV int cmp_keys(nptr a, akv_u32 al, nptr b, akv_u32 bl) {
    akv_u32 n = al < bl ? al : bl;
    for (akv_u32 i = 0; i < n; i++) {
        akv_u32 x = a[i], y = b[i];
        if (x != y) return x < y ? -1 : 1;
    }
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

/* The lanes of one request. */
struct grp {
    akv_u32 lane;
    akv_u32 mask;  /* the group's lanes in the warp */
    akv_u32 shift; /* first lane of the group */
    akv_u8 *stage; /* the group's stage (16-byte aligned) */
    akv_u32 fetched;
};

/* Acquire load of a node's lock/used word, system scope (the CPU writes it). */
AKV_DEV akv_u64 load_word(nptr p, int on_device) {
#ifdef __CUDACC__
    akv_u64 v;
    if (on_device) return *(const volatile akv_u64 *)p;
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"((const akv_u64 *)p) : "memory");
    return v;
#else
    (void)on_device;
    return __atomic_load_n((const akv_u64 *)p, __ATOMIC_ACQUIRE);
#endif
}

AKV_DEV akv_u64 load_entry(const akv_u64 *p) {
#ifdef __CUDACC__
    return *(const volatile akv_u64 *)p;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

AKV_DEV akv_u32 load_slot(const akv_u32 *p) {
#ifdef __CUDACC__
    return *(const volatile akv_u32 *)p;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/* Makes node bytes [lo, hi) of `src` readable at the same node offsets through the returned
 * base: staged into `dst` (capacity `cap`) by the group's lanes, or `src` itself when the
 * node is in device memory or the range does not fit. */
AKV_DEV nptr fetch(struct grp *g, nptr src, int on_device, akv_u32 lo, akv_u32 hi, akv_u8 *dst, akv_u32 cap) {
    if (on_device || hi <= lo) return src;
#ifdef __CUDACC__
    akv_u32 alo = lo & ~15u, ahi = (hi + 15u) & ~15u;
    if (ahi - alo > cap) {
        g->fetched += hi - lo;
        return src;
    }
    const volatile uint4 *s = (const volatile uint4 *)(src + alo);
    uint4 *d = (uint4 *)dst;
    for (akv_u32 i = g->lane; i < (ahi - alo) / 16; i += AKV_GROUP) {
        uint4 v;
        v.x = s[i].x; v.y = s[i].y; v.z = s[i].z; v.w = s[i].w;
        d[i] = v;
    }
    __syncwarp(g->mask);
    g->fetched += ahi - alo;
    return (nptr)(dst - alo);
#else
    if (hi - lo > cap) {
        g->fetched += hi - lo;
        return src;
    }
    memcpy(dst, (const akv_u8 *)src + lo, hi - lo);
    g->fetched += hi - lo;
    return (nptr)(dst - lo);
#endif
}

/* Before the group overwrites its stage, every lane is done reading it. */
AKV_DEV void stage_done(struct grp *g) {
#ifdef __CUDACC__
    __syncwarp(g->mask);
#else
    (void)g;
#endif
}

/* One visited node version: `h` reads its header and shortcut block, `seg` the fetched
 * part of its sorted block, `lg` its log block; `raw` is the node itself. */
struct node {
    nptr raw, h, seg, lg;
    int on_device;
    akv_u32 used, ss, se, nsc, seg_lo, seg_hi;
    akv_u64 version;
    int leaf;
};

AKV_DEV nptr host_node(const struct akv_tables *t, akv_u64 off) {
    const akv_u8 *base = (const akv_u8 *)t->chunks[off >> t->chunk_shift];
    return (nptr)(base + (off & ((1ull << t->chunk_shift) - 1)));
}

/* Loads the version of `lid` that read version `rv` sees: header and shortcut block staged,
 * `used` acquired. Returns 0 when a node does not check. */
AKV_NOINLINE int load_node(const struct akv_tables *t, struct grp *g, akv_u64 lid, akv_u64 rv, struct node *n) {
    if (lid == 0 || lid >= t->pt_len) return 0;
    akv_u64 off = load_entry(t->pt + lid);
    akv_u32 slot = load_slot(t->cslot + lid);
    nptr raw;
    int dev;
    if (slot) {
        raw = (nptr)(t->cache + (akv_u64)(slot - 1) * t->node_size);
        dev = 1;
    } else {
        if (off == NO_BUFFER) return 0;
        raw = host_node(t, off);
        dev = 0;
    }
    for (int hops = 0;; hops++) {
        if (hops > 1000000) return 0;
        stage_done(g);
        nptr h = fetch(g, raw, dev, 0, t->head_cap, g->stage, t->head_cap);
        akv_u64 version = rd64(h, N_VERSION);
        akv_u64 old = rd64(h, N_OLD);
        if (version <= rv || old == NO_BUFFER) {
            akv_u64 word = load_word(raw, dev);
            n->raw = raw;
            n->h = h;
            n->on_device = dev;
            n->used = (akv_u32)(word >> 32);
            n->ss = rd16(h, N_SORTED_START);
            n->se = rd32(h, N_SORTED_END);
            n->nsc = rd8(h, N_NSC);
            n->version = version;
            n->leaf = rd8(h, N_KIND) == KIND_LEAF;
            if (n->ss > t->head_cap) n->h = raw; /* larger shortcut block than staged */
            if (n->used > t->node_size || n->se > n->used || n->ss > n->se || n->ss < N_HEADER) return 0;
            n->seg = raw;
            n->lg = raw;
            n->seg_lo = n->seg_hi = 0;
            return 1;
        }
        raw = host_node(t, old);
        dev = 0;
    }
}

/* Stages node bytes [lo, hi) of the sorted block (a segment, or the rest of the block). */
AKV_DEV void stage_sorted(const struct akv_tables *t, struct grp *g, struct node *n, akv_u32 lo, akv_u32 hi) {
    stage_done(g);
    n->seg = fetch(g, n->raw, n->on_device, lo, hi, g->stage + t->head_cap, t->seg_cap);
    n->seg_lo = lo;
    n->seg_hi = hi;
}

AKV_DEV void stage_log(const struct akv_tables *t, struct grp *g, struct node *n) {
    stage_done(g);
    n->lg = fetch(g, n->raw, n->on_device, n->se, n->used, g->stage + t->head_cap + t->seg_cap, t->log_cap);
}

/* Shortcut entry `i` steps past the one at `pos`. */
AKV_DEV akv_u32 sc_skip(nptr h, akv_u32 pos, akv_u32 i) {
    for (akv_u32 j = 0; j < i; j++) pos += 4 + rd16(h, pos + 2);
    return pos;
}

/* Whether shortcut `base + lane` (entry `base` at `pos`) is <= key (< key when strict). */
AKV_DEV int sc_le(nptr h, akv_u32 pos, akv_u32 base, akv_u32 lane, akv_u32 nsc, nptr key, akv_u32 klen, int strict) {
    if (base + lane >= nsc) return 0;
    akv_u32 p = sc_skip(h, pos, lane);
    int c = cmp_keys(h + p + 4, rd16(h, p + 2), key, klen);
    return strict ? c < 0 : c <= 0;
}

/* Sorted-block iterator (node offsets). */
struct sit {
    akv_u32 pos;    /* next item */
    akv_u32 sc;     /* next shortcut entry not yet passed */
    akv_u32 sc_left;
};

/* The segment to search for `key`: the last boundary key <= key (< key when strict), by a
 * ballot of the group's lanes over the boundary keys. */
AKV_DEV struct sit seek(struct grp *g, struct node *n, nptr key, akv_u32 klen, int strict) {
    (void)g;
    akv_u32 pos = N_HEADER, chosen = 0, found = 0;
    for (akv_u32 base = 0; base < n->nsc; base += AKV_GROUP) {
        akv_u32 mask;
#ifdef __CUDACC__
        mask = (__ballot_sync(g->mask, sc_le(n->h, pos, base, g->lane, n->nsc, key, klen, strict)) >> g->shift) & AKV_GMASK;
#else
        mask = 0;
        for (akv_u32 l = 0; l < AKV_GROUP; l++)
            if (sc_le(n->h, pos, base, l, n->nsc, key, klen, strict)) mask |= 1u << l;
#endif
        /* Boundary keys ascend, so the lanes that hold form a prefix of the group. */
        akv_u32 cnt = 0;
        while (cnt < AKV_GROUP && (mask >> cnt) & 1u) cnt++;
        if (cnt) {
            found = 1;
            chosen = sc_skip(n->h, pos, cnt - 1);
        }
        if (cnt < AKV_GROUP) {
            break;
        }
        pos = sc_skip(n->h, pos, AKV_GROUP);
    }
    struct sit it;
    if (!found) {
        it.pos = n->ss;
        it.sc = N_HEADER;
        it.sc_left = n->nsc;
    } else {
        /* index of `chosen` */
        akv_u32 idx = 0, p = N_HEADER;
        while (p != chosen) { p += 4 + rd16(n->h, p + 2); idx++; }
        it.pos = n->ss + rd16(n->h, chosen);
        it.sc = chosen;
        it.sc_left = n->nsc - idx;
    }
    return it;
}

/* End of the segment holding `it.pos`. */
AKV_DEV akv_u32 seg_end(struct node *n, struct sit it) {
    akv_u32 p = it.sc;
    for (akv_u32 left = it.sc_left; left > 0; left--) {
        akv_u32 s = n->ss + rd16(n->h, p);
        if (s > it.pos) return s;
        p += 4 + rd16(n->h, p + 2);
    }
    return n->se;
}

/* An item: key (base and offset), and body offset (read through n->seg). */
struct item {
    nptr kb;
    akv_u32 ko, klen, body;
};

/* Offset of a value's body: past its header and, when it has them, its deadline and its
 * client flags. */
AKV_DEV akv_u32 value_body(nptr b, akv_u32 body) {
    akv_u32 hdr = rd16(b, body);
    return body + 2 + ((hdr & V_EXPIRES) ? 8 : 0) + ((hdr & V_FLAGS) ? 4 : 0);
}

AKV_DEV akv_u32 value_end(nptr b, akv_u32 body) {
    akv_u32 hdr = rd16(b, body);
    akv_u32 at = value_body(b, body);
    return (hdr & V_OOL) ? at + 12 : at + (hdr & V_LEN_MASK);
}

/* Whether a reader whose clock reads `now` no longer sees the value (node/src/view.rs,
 * ValueRef::is_expired: present at its deadline, gone after). */
AKV_DEV int value_expired(nptr b, akv_u32 body, akv_u64 now) {
    if (!(rd16(b, body) & V_EXPIRES)) return 0;
    akv_u64 d = rd64(b, body + 2);
    return d != 0 && now > d;
}

/* Next sorted item; stages each segment as the iterator enters it. */
AKV_DEV int next_item(const struct akv_tables *t, struct grp *g, struct node *n, struct sit *it, struct item *out) {
    if (it->pos >= n->se) return 0;
    if (it->pos < n->seg_lo || it->pos >= n->seg_hi) {
        /* Leaves stage the rest of the block when it fits (a scan walks on), else one
         * segment; the sorted block is immutable, so staging never misses an item. */
        akv_u32 hi = seg_end(n, *it);
        if (n->se - it->pos <= t->seg_cap) hi = n->se;
        stage_sorted(t, g, n, it->pos, hi);
    }
    nptr b = n->seg;
    akv_u32 at = it->pos;
    if (it->sc_left > 0 && n->ss + rd16(n->h, it->sc) == at) {
        out->kb = n->h;
        out->ko = it->sc + 4;
        out->klen = rd16(n->h, it->sc + 2);
        out->body = at;
        it->sc += 4 + out->klen;
        it->sc_left--;
    } else {
        out->klen = rd16(b, at) & KEY_LEN_MASK;
        out->kb = b;
        out->ko = at + 2;
        out->body = at + 2 + out->klen;
    }
    it->pos = n->leaf ? value_end(b, out->body) : out->body + 6;
    if (it->pos > n->se) return 0;
    return 1;
}

/* A log entry. */
struct lent {
    akv_u32 off, back, flags, ko, klen, vbody; /* vbody: value header offset (0: tombstone) */
    akv_u64 version;
    akv_u32 end;
};

AKV_DEV void log_entry(struct node *n, akv_u32 off, struct lent *e) {
    nptr b = n->lg;
    e->off = off;
    e->back = n->ss + rd16(b, off);
    e->version = n->version + rd40(b, off + 3);
    akv_u32 khdr = rd16(b, off + LOG_HDR);
    e->klen = khdr & KEY_LEN_MASK;
    e->flags = khdr & ~KEY_LEN_MASK;
    e->ko = off + LOG_HDR + 2;
    if (e->flags & F_TOMB) {
        e->vbody = 0;
        e->end = e->ko + e->klen;
    } else {
        e->vbody = e->ko + e->klen;
        e->end = value_end(b, e->vbody);
    }
}

/* A result value: inline bytes (base, offset) or an out-of-line reference. */
struct val {
    nptr b;
    akv_u32 body;
};

/* Merged, version-filtered leaf iterator (node/src/leaf.rs, LeafIter). */
struct leaf_it {
    struct sit s;
    akv_u16 ord[MAX_LOG];
    akv_u32 n_ord, li;
    akv_u64 rv, now;
};

AKV_DEV int leaf_init(struct node *n, struct leaf_it *L, struct sit s, akv_u64 rv, akv_u64 now) {
    L->s = s;
    L->rv = rv;
    L->now = now;
    L->n_ord = 0;
    akv_u32 pos = n->se;
    while (pos < n->used) {
        if (L->n_ord >= MAX_LOG) return 0;
        struct lent e;
        log_entry(n, pos, &e);
        if (e.end > n->used) return 0;
        akv_u32 hint = rd8(n->lg, pos + 2);
        if (hint > L->n_ord) return 0;
        for (akv_u32 j = L->n_ord; j > hint; j--) L->ord[j] = L->ord[j - 1];
        L->ord[hint] = (akv_u16)pos;
        L->n_ord++;
        pos = e.end;
    }
    /* Entries positioned before the chosen segment hold keys below its boundary key. */
    L->li = 0;
    while (L->li < L->n_ord) {
        struct lent e;
        log_entry(n, L->ord[L->li], &e);
        if (e.back >= s.pos) break;
        L->li++;
    }
    return 1;
}

/* Next visible item: 1 with key and value, 0 at the end. */
AKV_DEV int leaf_next(const struct akv_tables *t, struct grp *g, struct node *n, struct leaf_it *L, nptr *kb, akv_u32 *ko, akv_u32 *klen, struct val *v) {
    for (;;) {
        if (L->li < L->n_ord) {
            struct lent e;
            log_entry(n, L->ord[L->li], &e);
            if (L->s.pos >= n->se || e.back <= L->s.pos) {
                /* The run of entries for e's key, newest first, and the item it shadows. */
                struct lent chosen = e, cur = e;
                int have = 0;
                for (;;) {
                    L->li++;
                    if (!have && cur.version <= L->rv) { chosen = cur; have = 1; }
                    if (!(cur.flags & F_DUP) || L->li >= L->n_ord) break;
                    log_entry(n, L->ord[L->li], &cur);
                }
                struct item sh;
                int shadowed = (e.flags & F_EQ) ? next_item(t, g, n, &L->s, &sh) : 0;
                if (have) {
                    if (chosen.flags & F_TOMB) continue;
                    if (value_expired(n->lg, chosen.vbody, L->now)) continue;
                    *kb = n->lg; *ko = chosen.ko; *klen = chosen.klen;
                    v->b = n->lg; v->body = chosen.vbody;
                    return 1;
                }
                if (shadowed) {
                    if (value_expired(n->seg, sh.body, L->now)) continue;
                    *kb = sh.kb; *ko = sh.ko; *klen = sh.klen;
                    v->b = n->seg; v->body = sh.body;
                    return 1;
                }
                continue;
            }
        }
        struct item s;
        if (!next_item(t, g, n, &L->s, &s)) return 0;
        if (value_expired(n->seg, s.body, L->now)) continue;
        *kb = s.kb; *ko = s.ko; *klen = s.klen;
        v->b = n->seg; v->body = s.body;
        return 1;
    }
}

/* Output writer (lane 0 writes; every lane keeps the same counts). */
struct outw {
    akv_u8 *base;
    akv_u32 cap, used, count, full, write;
};

AKV_DEV void put8(struct outw *o, akv_u32 at, akv_u32 v) { if (o->write) o->base[at] = (akv_u8)v; }
AKV_DEV void put16(struct outw *o, akv_u32 at, akv_u32 v) { put8(o, at, v & 0xff); put8(o, at + 1, v >> 8); }
AKV_DEV void put32(struct outw *o, akv_u32 at, akv_u32 v) { put16(o, at, v & 0xffff); put16(o, at + 2, v >> 16); }
AKV_DEV void put64(struct outw *o, akv_u32 at, akv_u64 v) { put32(o, at, (akv_u32)v); put32(o, at + 4, (akv_u32)(v >> 32)); }

/* Appends an item; 0 (and `full`) when it does not fit. */
AKV_DEV int emit(struct outw *o, nptr kb, akv_u32 ko, akv_u32 klen, struct val v) {
    akv_u32 hdr = rd16(v.b, v.body);
    int ool = (hdr & V_OOL) != 0;
    akv_u32 vb = value_body(v.b, v.body);
    akv_u32 vlen = ool ? rd32(v.b, vb + 8) : (hdr & V_LEN_MASK);
    akv_u32 need = AKV_ITEM_HEADER + (ool ? 8 : 0) + klen + (ool ? 0 : vlen);
    if (o->used + need > o->cap) { o->full = 1; return 0; }
    akv_u32 at = o->used;
    put16(o, at, klen);
    put8(o, at + 2, ool ? AKV_TAG_OUT_OF_LINE : AKV_TAG_INLINE);
    put8(o, at + 3, 0);
    put32(o, at + 4, vlen);
    at += AKV_ITEM_HEADER;
    if (ool) { put64(o, at, rd64(v.b, vb)); at += 8; }
    for (akv_u32 i = 0; i < klen; i++) put8(o, at + i, kb[ko + i]);
    at += klen;
    if (!ool) for (akv_u32 i = 0; i < vlen; i++) put8(o, at + i, v.b[vb + i]);
    o->used += need;
    o->count++;
    return 1;
}

/* Interior node: the child of the largest separator <= key (< key when strict), or the
 * leftmost child; copies that separator into `fence` when one was passed. */
AKV_DEV akv_u64 route(const struct akv_tables *t, struct grp *g, struct node *n, nptr key, akv_u32 klen, int strict, akv_u8 *fence, akv_u32 *fence_len) {
    struct sit it = seek(g, n, key, klen, strict);
    akv_u32 end = seg_end(n, it);
    akv_u64 child = rd48(n->h, N_LINK);
    struct item s;
    while (it.pos < end && next_item(t, g, n, &it, &s)) {
        int c = cmp_keys(s.kb + s.ko, s.klen, key, klen);
        if (c > 0 || (c == 0 && strict)) break;
        child = rd48(n->seg, s.body);
        if (fence) {
            for (akv_u32 i = 0; i < s.klen; i++) fence[i] = s.kb[s.ko + i];
            *fence_len = s.klen;
        }
    }
    return child;
}

/* Descends to the leaf for `key` at `rv`. */
AKV_DEV int descend(const struct akv_tables *t, struct grp *g, nptr key, akv_u32 klen, akv_u64 rv, struct node *n) {
    if (!load_node(t, g, 1, rv, n)) return 0;
    for (int d = 0; !n->leaf; d++) {
        if (d > MAX_DEPTH) return 0;
        akv_u64 child = route(t, g, n, key, klen, 0, 0, 0);
        if (!load_node(t, g, child, rv, n)) return 0;
    }
    return 1;
}

/* GET: the newest visible log entry for the key, else the sorted item. */
AKV_DEV akv_u32 do_get(const struct akv_tables *t, struct grp *g, nptr key, akv_u32 klen, akv_u64 rv, akv_u64 now, struct outw *o) {
    struct node n;
    if (!descend(t, g, key, klen, rv, &n)) return AKV_BAD_NODE;
    struct sit it = seek(g, &n, key, klen, 0);
    stage_log(t, g, &n);
    akv_u32 pos = n.se;
    int have = 0;
    struct lent newest = {0, 0, 0, 0, 0, 0, 0, 0};
    while (pos < n.used) {
        struct lent e;
        log_entry(&n, pos, &e);
        if (e.end > n.used) return AKV_BAD_NODE;
        if (e.version <= rv && cmp_keys(n.lg + e.ko, e.klen, key, klen) == 0) { newest = e; have = 1; }
        pos = e.end;
    }
    if (have) {
        if (newest.flags & F_TOMB) return AKV_OK;
        if (value_expired(n.lg, newest.vbody, now)) return AKV_OK;
        struct val v = { n.lg, newest.vbody };
        emit(o, n.lg, newest.ko, newest.klen, v);
        return o->full ? AKV_TRUNCATED : AKV_OK;
    }
    struct item s;
    while (next_item(t, g, &n, &it, &s)) {
        int c = cmp_keys(s.kb + s.ko, s.klen, key, klen);
        if (c < 0) continue;
        if (c == 0 && !value_expired(n.seg, s.body, now)) {
            struct val v = { n.seg, s.body };
            emit(o, s.kb, s.ko, s.klen, v);
        }
        break;
    }
    return o->full ? AKV_TRUNCATED : AKV_OK;
}

/* SCAN from `lo` (after it when lo_excl) while below `hi` (through it when hi_incl). */
AKV_DEV akv_u32 do_scan(const struct akv_tables *t, struct grp *g, nptr lo, akv_u32 lolen, int lo_excl, nptr hi, akv_u32 hilen, int has_hi, int hi_incl, akv_u32 limit, akv_u64 rv, akv_u64 now, struct outw *o) {
    if (limit == 0) return AKV_OK;
    struct node n;
    if (!descend(t, g, lo, lolen, rv, &n)) return AKV_BAD_NODE;
    struct sit it = seek(g, &n, lo, lolen, 0);
    for (akv_u32 leaves = 0;; leaves++) {
        if (leaves > (1u << 26)) return AKV_BAD_NODE;
        if (leaves > 0) it = seek(g, &n, lo, 0, 1); /* from the first item */
        stage_log(t, g, &n);
        struct leaf_it L;
        if (!leaf_init(&n, &L, it, rv, now)) return AKV_BAD_NODE;
        nptr kb; akv_u32 ko, klen; struct val v;
        while (leaf_next(t, g, &n, &L, &kb, &ko, &klen, &v)) {
            int c = cmp_keys(kb + ko, klen, lo, lolen);
            if (c < 0 || (c == 0 && lo_excl)) continue;
            if (has_hi) {
                int h = cmp_keys(kb + ko, klen, hi, hilen);
                if (h > 0 || (h == 0 && !hi_incl)) return AKV_OK;
            }
            if (!emit(o, kb, ko, klen, v)) return AKV_TRUNCATED;
            if (o->count == limit) return AKV_OK;
        }
        akv_u64 next = rd48(n.h, N_LINK);
        if (next == 0) return AKV_OK;
        if (!load_node(t, g, next, rv, &n)) return AKV_BAD_NODE;
    }
}

/* The largest visible key <= probe in leaf `n` (< probe when strict), copied to `out`. */
AKV_DEV int leaf_floor(const struct akv_tables *t, struct grp *g, struct node *n, nptr probe, akv_u32 plen, int strict, akv_u64 rv, akv_u64 now, akv_u8 *out, akv_u32 *out_len, int *bad) {
    int found = 0;
    stage_log(t, g, n);
    for (int pass = 0; pass < 2 && !found; pass++) {
        /* First from the segment the shortcut block picks; when every item there is above
         * the probe or deleted, the whole leaf (node/src/leaf.rs, leaf_floor). */
        if (strict && pass == 0) continue;
        struct sit it = pass == 0 ? seek(g, n, probe, plen, 0) : seek(g, n, probe, 0, 1);
        struct leaf_it L;
        if (!leaf_init(n, &L, it, rv, now)) { *bad = 1; return 0; }
        nptr kb; akv_u32 ko, klen; struct val v;
        while (leaf_next(t, g, n, &L, &kb, &ko, &klen, &v)) {
            int c = cmp_keys(kb + ko, klen, probe, plen);
            if (c > 0 || (c == 0 && strict)) break;
            for (akv_u32 i = 0; i < klen; i++) out[i] = kb[ko + i];
            *out_len = klen;
            found = 1;
        }
    }
    return found;
}

/* SCAN_FLOOR: from the largest key <= kl (or the first key) through ku. */
AKV_DEV akv_u32 do_scan_floor(const struct akv_tables *t, struct grp *g, nptr kl, akv_u32 kllen, nptr ku, akv_u32 kulen, akv_u32 limit, akv_u64 rv, akv_u64 now, struct outw *o) {
    akv_u8 probe[MAX_KEY], fence[MAX_KEY], start[MAX_KEY];
    akv_u32 plen = kllen, flen = 0, slen = 0;
    if (plen > MAX_KEY) return AKV_BAD_NODE;
    for (akv_u32 i = 0; i < plen; i++) probe[i] = kl[i];
    int strict = 0, found = 0;
    for (int rounds = 0; rounds < 100000; rounds++) {
        struct node n;
        if (!load_node(t, g, 1, rv, &n)) return AKV_BAD_NODE;
        int have_fence = 0;
        for (int d = 0; !n.leaf; d++) {
            if (d > MAX_DEPTH) return AKV_BAD_NODE;
            akv_u32 sl = 0xffffffffu;
            akv_u64 child = route(t, g, &n, (nptr)probe, plen, strict, fence, &sl);
            if (sl != 0xffffffffu) { have_fence = 1; flen = sl; }
            if (!load_node(t, g, child, rv, &n)) return AKV_BAD_NODE;
        }
        int bad = 0;
        found = leaf_floor(t, g, &n, (nptr)probe, plen, strict, rv, now, start, &slen, &bad);
        if (bad) return AKV_BAD_NODE;
        if (found || !have_fence) break;
        for (akv_u32 i = 0; i < flen; i++) probe[i] = fence[i];
        plen = flen;
        strict = 1;
    }
    if (!found) slen = 0;
    return do_scan(t, g, (nptr)start, slen, 0, ku, kulen, 1, 1, limit, rv, now, o);
}

AKV_DEV void run_request(const struct akv_tables *t, struct grp *g, const struct akv_req *r, const akv_u8 *keys, akv_u8 *out) {
    struct outw o;
    o.base = out + r->out_off + sizeof(struct akv_out);
    o.cap = r->out_cap - (akv_u32)sizeof(struct akv_out);
    o.used = o.count = o.full = 0;
    o.write = g->lane == 0;
    nptr key = (nptr)(keys + r->key_off);
    nptr hi = (nptr)(keys + r->hi_off);
    akv_u32 status;
    if (r->kind == AKV_GET) {
        status = do_get(t, g, key, r->key_len, r->rv, r->now, &o);
    } else if (r->kind == AKV_SCAN) {
        status = do_scan(t, g, key, r->key_len, (r->flags & AKV_LO_EXCL) != 0, hi, r->hi_len, (r->flags & AKV_HAS_HI) != 0, (r->flags & AKV_HI_INCL) != 0, r->limit, r->rv, r->now, &o);
    } else {
        status = do_scan_floor(t, g, key, r->key_len, hi, r->hi_len, r->limit, r->rv, r->now, &o);
    }
    if (g->lane == 0) {
        struct akv_out *h = (struct akv_out *)(out + r->out_off);
        h->status = status;
        h->count = o.count;
        h->bytes = o.used;
        h->fetched = g->fetched;
    }
}

#ifdef __CUDACC__
/* One group of AKV_GROUP lanes per request; dynamic shared memory holds one stage per
 * group (t.stage bytes each). */
extern "C" __global__ void akv_lookup(struct akv_tables t, const struct akv_req *reqs, const akv_u8 *keys, akv_u32 nreq, akv_u8 *out) {
    extern __shared__ __align__(16) akv_u8 akv_stage[];
    akv_u32 tid = blockIdx.x * blockDim.x + threadIdx.x;
    akv_u32 req = tid / AKV_GROUP;
    akv_u32 lane_in_warp = threadIdx.x & 31u;
    struct grp g;
    g.lane = tid % AKV_GROUP;
    g.shift = lane_in_warp - g.lane;
    g.mask = AKV_GMASK << g.shift;
    g.stage = akv_stage + (threadIdx.x / AKV_GROUP) * t.stage;
    g.fetched = 0;
    if (req >= nreq) return;
    run_request(&t, &g, &reqs[req], keys, out);
}

/* Applies page-table and interior-cache updates, one 64-bit (32-bit) store each, so a
 * kernel of an earlier batch running meanwhile reads either mapping, never a torn one. */
extern "C" __global__ void akv_apply(akv_u64 *pt, akv_u32 *cslot, const struct akv_update *u, akv_u32 nu, const struct akv_slot_update *s, akv_u32 ns) {
    akv_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nu) *(volatile akv_u64 *)(pt + u[i].lid) = u[i].off;
    if (i < ns) *(volatile akv_u32 *)(cslot + s[i].lid) = (akv_u32)s[i].slot;
}
#endif
