// C ABI over the Verilator model of the tree-walk engine (sv/walk.sv), for the Rust crate:
// one call per clock cycle sets every input, ticks, and reads every output, so the memory
// model and the request feeder can live in Rust.
#include <cstdint>
#include <cstring>
#include "Vwalk.h"
#include "sim.h"

using Model = Sim<Vwalk>;

extern "C" {

struct walk_in {
    uint64_t in_rv;
    uint64_t in_now;
    uint32_t in_tag;
    uint32_t in_key_len;
    uint32_t mresp_tag;
    uint32_t mresp_idx;
    uint8_t in_key_valid;
    uint8_t in_key_idx;
    uint8_t in_valid;
    uint8_t mresp_valid;
    uint8_t mresp_pt;
    uint8_t mresp_last;
    uint8_t flush;
    uint8_t pad;
    uint8_t in_key_data[64];
    uint8_t mresp_data[64];
};

struct walk_out {
    uint64_t mreq_addr;
    uint64_t out_node;
    uint32_t out_tag;
    uint32_t out_value_off;
    uint32_t out_cycles;
    uint8_t in_ready;
    uint8_t in_slot;
    uint8_t mreq_valid;
    uint8_t mreq_pt;
    uint8_t mreq_tag;
    uint8_t out_valid;
    uint8_t out_status;
    uint8_t out_visits;
};

void* walk_new(uint32_t slots, uint32_t ksus, uint64_t root) {
    Model* s = new Model();
    s->top->cfg_slots = slots;
    s->top->cfg_ksus = ksus;
    s->top->root_lid = root;
    s->reset();
    return s;
}

void walk_free(void* h) { delete static_cast<Model*>(h); }

// One cycle: the inputs for its rising edge, then the outputs after it.
void walk_step(void* h, const walk_in* in, walk_out* out) {
    Model* s = static_cast<Model*>(h);
    Vwalk* t = s->top;
    t->in_key_valid = in->in_key_valid;
    t->in_key_idx = in->in_key_idx;
    if (in->in_key_valid) put_beat(t->in_key_data, in->in_key_data);
    t->in_valid = in->in_valid;
    t->in_tag = in->in_tag;
    t->in_key_len = in->in_key_len;
    t->in_rv = in->in_rv;
    t->in_now = in->in_now;
    t->mresp_valid = in->mresp_valid;
    t->mresp_pt = in->mresp_pt;
    t->mresp_tag = in->mresp_tag;
    t->mresp_idx = in->mresp_idx;
    t->mresp_last = in->mresp_last;
    if (in->mresp_valid) put_beat(t->mresp_data, in->mresp_data);
    t->flush = in->flush;
    s->tick();
    out->in_ready = t->in_ready;
    out->in_slot = t->in_slot;
    out->mreq_valid = t->mreq_valid;
    out->mreq_pt = t->mreq_pt;
    out->mreq_addr = t->mreq_addr;
    out->mreq_tag = t->mreq_tag;
    out->out_valid = t->out_valid;
    out->out_tag = t->out_tag;
    out->out_status = t->out_status;
    out->out_node = t->out_node;
    out->out_value_off = t->out_value_off;
    out->out_cycles = t->out_cycles;
    out->out_visits = t->out_visits;
}

// The engine's counters: cycles, node reads, page-table reads, cache hits, beats, unit-busy
// cycles.
void walk_counters(void* h, uint64_t* c) {
    Vwalk* t = static_cast<Model*>(h)->top;
    c[0] = t->n_cycles;
    c[1] = t->n_node_reads;
    c[2] = t->n_pt_reads;
    c[3] = t->n_cache_hits;
    c[4] = t->n_beats;
    c[5] = t->n_busy;
}

}  // extern "C"
