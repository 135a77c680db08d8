// C ABI over the Verilator models of the key search unit (sv/ksu.sv), for the Rust crate:
// load a node and a key as 64-byte beats, run one search, report the answer and its cycles.
// Two models: `ksu_*` with the default parameters (keys up to 512 bytes) and `ksu64_*` with
// KEY_BYTES = 64, the configuration synth/ksu.sh places and routes.
#include <cstdint>
#include <cstring>
#include "Vksu.h"
#include "Vksu64.h"
#include "sim.h"

extern "C" struct ksu_answer {
    uint32_t status;
    uint32_t value_off;
    uint64_t next;
    uint32_t cycles;
};

namespace {

template <typename Model>
struct KsuSim : Sim<Model> {
    using Sim<Model>::tick;
    // Loads `len` bytes as beats through `valid`/`idx`/`data`, waiting for `ready`.
    template <typename V, typename I>
    void load(const uint8_t* p, size_t len, V& valid, I& idx, VlWide<16>& data, uint8_t& ready) {
        for (size_t beat = 0; beat * 64 < len; beat++) {
            while (!ready) tick();
            size_t n = len - beat * 64 < 64 ? len - beat * 64 : 64;
            put_beat(data, p + beat * 64, n);
            idx = beat;
            valid = 1;
            tick();
            valid = 0;
        }
        while (!ready) tick();
    }
};

template <typename Model>
void load_node(void* h, const uint8_t* node, size_t len) {
    KsuSim<Model>* s = static_cast<KsuSim<Model>*>(h);
    s->load(node, len, s->top->beat_valid, s->top->beat_idx, s->top->beat_data,
            s->top->beat_ready);
}

template <typename Model>
void load_key(void* h, const uint8_t* key, size_t len) {
    KsuSim<Model>* s = static_cast<KsuSim<Model>*>(h);
    s->load(key, len, s->top->key_valid, s->top->key_idx, s->top->key_data, s->top->key_ready);
}

// Runs a search for the loaded key (`key_len` bytes); returns 0, or -1 when the unit did not
// answer within `max_cycles`.
template <typename Model>
int search(void* h, uint32_t key_len, uint64_t rv, uint64_t now, uint64_t max_cycles,
           ksu_answer* out) {
    KsuSim<Model>* s = static_cast<KsuSim<Model>*>(h);
    Model* t = s->top;
    t->key_len = key_len;
    t->rv = rv;
    t->now = now;
    t->start = 1;
    s->tick();
    t->start = 0;
    for (uint64_t c = 0; c < max_cycles; c++) {
        s->tick();
        if (t->done) {
            out->status = t->status;
            out->value_off = t->value_off;
            out->next = t->next;
            out->cycles = t->cycles;
            return 0;
        }
    }
    return -1;
}

template <typename Model>
void* make() {
    KsuSim<Model>* s = new KsuSim<Model>();
    s->reset();
    return s;
}

}  // namespace

#define KSU_ABI(MODEL, NAME)                                                                  \
    void* NAME##_new() { return make<MODEL>(); }                                               \
    void NAME##_free(void* h) { delete static_cast<KsuSim<MODEL>*>(h); }                       \
    void NAME##_load_node(void* h, const uint8_t* p, size_t n) { load_node<MODEL>(h, p, n); } \
    void NAME##_load_key(void* h, const uint8_t* p, size_t n) { load_key<MODEL>(h, p, n); }   \
    int NAME##_search(void* h, uint32_t key_len, uint64_t rv, uint64_t now, uint64_t max,      \
                      ksu_answer* out) {                                                       \
        return search<MODEL>(h, key_len, rv, now, max, out);                                   \
    }

extern "C" {
KSU_ABI(Vksu, ksu)
KSU_ABI(Vksu64, ksu64)
}  // extern "C"
