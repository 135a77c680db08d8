// C ABI over the Verilator model of the frame parser (sv/frame_parser.sv): stream one buffer
// through it a byte a cycle, collect the operations it emits and its outcome.
#include <cstdint>
#include <cstring>
#include "Vframe_parser.h"
#include "sim.h"

using Model = Sim<Vframe_parser>;

extern "C" {

struct fp_limits {
    uint32_t max_frame;
    uint32_t max_ops;
    uint32_t max_key;
    uint32_t max_value;
    uint32_t max_token;
};

struct fp_op {
    uint32_t key_off;
    uint32_t val_off;
    uint32_t val_len;
    uint16_t id;
    uint16_t key_len;
    uint8_t opcode;
    uint8_t verdict;
    uint8_t status;
    uint8_t pad;
};

struct fp_outcome {
    uint32_t err;
    uint32_t why;
    uint32_t arg;
    uint32_t ops;
    uint64_t cycles;
};

void* fp_new() { return new Model(); }

void fp_free(void* h) { delete static_cast<Model*>(h); }

// Parses `buf`; writes at most `cap` operations to `ops`. Returns 0, or -1 when the parser
// did not finish within `max_cycles`, or -2 when it emitted more than `cap` operations.
int fp_parse(void* h, const uint8_t* buf, size_t len, const fp_limits* lim, fp_op* ops,
             size_t cap, uint64_t max_cycles, fp_outcome* out) {
    Model* s = static_cast<Model*>(h);
    Vframe_parser* t = s->top;
    t->max_frame = lim->max_frame;
    t->max_ops = lim->max_ops;
    t->max_key = lim->max_key;
    t->max_value = lim->max_value;
    t->max_token = lim->max_token;
    t->in_valid = 0;
    t->in_end = 0;
    t->rst = 1;
    s->tick();
    t->rst = 0;
    size_t at = 0, n = 0;
    for (uint64_t c = 0; c < max_cycles; c++) {
        // inputs for this cycle, from the outputs after the last one
        t->in_valid = (t->in_ready && at < len) ? 1 : 0;
        t->in_byte = at < len ? buf[at] : 0;
        t->in_end = at >= len ? 1 : 0;
        bool took = t->in_valid;
        s->tick();
        if (took) at++;
        if (t->op_valid) {
            if (n == cap) return -2;
            fp_op& o = ops[n++];
            o.key_off = t->op_key_off;
            o.val_off = t->op_val_off;
            o.val_len = t->op_val_len;
            o.id = t->op_id;
            o.key_len = t->op_key_len;
            o.opcode = t->op_opcode;
            o.verdict = t->op_verdict;
            o.status = t->op_status;
        }
        if (t->done) {
            out->err = t->err;
            out->why = t->why;
            out->arg = t->arg;
            out->ops = n;
            out->cycles = c + 1;
            return 0;
        }
    }
    return -1;
}

}  // extern "C"
