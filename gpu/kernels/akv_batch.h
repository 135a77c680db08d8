/* accelkv GPU engine: the batch layout shared by the host (gpu/src/layout.rs) and the
 * kernels (lookup.cu). All fields little-endian; sizes checked on both sides. */
#ifndef AKV_BATCH_H
#define AKV_BATCH_H

typedef unsigned char akv_u8;
typedef unsigned short akv_u16;
typedef unsigned int akv_u32;
typedef unsigned long long akv_u64;

/* Request kinds. */
#define AKV_GET 0
#define AKV_SCAN 1       /* keys >= lo (> lo with AKV_LO_EXCL), below hi */
#define AKV_SCAN_FLOOR 2 /* from the largest key <= lo (or the first key), hi inclusive */

/* Request flags. */
#define AKV_HAS_HI 1    /* hi bounds the scan (else unbounded) */
#define AKV_LO_EXCL 2   /* skip an item whose key equals lo (a continuation) */
#define AKV_HI_INCL 4   /* hi is inclusive */

/* One request: 48 bytes. */
struct akv_req {
    akv_u64 rv;      /* read version */
    akv_u32 key_off; /* key (GET) or lo (scans) in the key area */
    akv_u16 key_len;
    akv_u8 kind;
    akv_u8 flags;
    akv_u32 hi_off;
    akv_u16 hi_len;
    akv_u16 pad0;
    akv_u32 limit;   /* most items (scans) */
    akv_u32 out_off; /* this request's output area */
    akv_u32 out_cap; /* its size in bytes */
    akv_u32 pad1;
    akv_u64 now;     /* reader's clock, ms since the Unix epoch: items whose deadline
                        is before it are absent (docs/FORMAT.md, VALUE_EXPIRES) */
};

/* Output area of a request: akv_out, then `count` items, each
 *   klen:u16 tag:u8 pad:u8 vlen:u32 [handle:u64 when tag = 1] key [value when tag = 0]. */
struct akv_out {
    akv_u32 status; /* AKV_OK, AKV_TRUNCATED, AKV_BAD_NODE */
    akv_u32 count;
    akv_u32 bytes;  /* bytes of items written */
    akv_u32 fetched; /* bytes this request read from host memory */
};
#define AKV_OK 0
#define AKV_TRUNCATED 1 /* out of room: items so far are valid; resume after the last key */
#define AKV_BAD_NODE 2  /* a node did not check (never expected; the host answers instead) */

#define AKV_TAG_INLINE 0
#define AKV_TAG_OUT_OF_LINE 1
#define AKV_ITEM_HEADER 8

/* One page-table update: LID -> arena offset, and its interior-cache slot (0: none,
 * else slot + 1). 16 bytes. */
struct akv_update {
    akv_u64 lid;
    akv_u64 off;
};
struct akv_slot_update {
    akv_u64 lid;
    akv_u64 slot;
};

#endif
