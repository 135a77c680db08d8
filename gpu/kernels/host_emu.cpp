/* Host emulation of the GPU engine's kernels, for tests on machines without a GPU: the
 * same lookup.cu compiled as C++, run one request at a time. The ballot of the shortcut
 * search is evaluated for every lane of a group (AKV_GROUP), as the GPU would; fetches are
 * plain copies. The host side of the engine (gpu/src/emu.rs) feeds it the same tables and
 * batches it gives the GPU. */
#include <stdlib.h>
#include "akv_batch.h"
#include "lookup.cu"

extern "C" void akv_host_lookup(const struct akv_tables *t, const struct akv_req *reqs, const akv_u8 *keys, akv_u32 nreq, akv_u8 *out) {
    akv_u8 *stage = (akv_u8 *)aligned_alloc(16, (t->stage + 15) & ~15u);
    for (akv_u32 i = 0; i < nreq; i++) {
        struct grp g;
        g.lane = 0;
        g.mask = 1;
        g.shift = 0;
        g.stage = stage;
        g.fetched = 0;
        run_request(t, &g, &reqs[i], keys, out);
    }
    free(stage);
}

extern "C" akv_u32 akv_host_group(void) { return AKV_GROUP; }
extern "C" akv_u32 akv_host_sizes(void) { return (akv_u32)(sizeof(struct akv_req) << 16 | sizeof(struct akv_out) << 8 | sizeof(struct akv_tables)); }
