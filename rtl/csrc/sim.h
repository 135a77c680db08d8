// What every C ABI over a Verilator model here shares: the model with its own context, a
// clock tick, and 64-byte beats into 512-bit ports.
#pragma once
#include <cstdint>
#include <cstring>
#include "verilated.h"

template <typename Model>
struct Sim {
    VerilatedContext ctx;
    Model* top;
    Sim() : top(nullptr) { top = new Model(&ctx); }
    ~Sim() {
        top->final();
        delete top;
    }
    Sim(const Sim&) = delete;
    Sim& operator=(const Sim&) = delete;
    // One rising edge.
    void tick() {
        top->clk = 0;
        top->eval();
        top->clk = 1;
        top->eval();
    }
    // Two cycles in reset, then one out of it.
    void reset() {
        top->rst = 1;
        tick();
        tick();
        top->rst = 0;
        tick();
    }
};

// `n` bytes (at most 64, zero-padded) into a 512-bit port.
inline void put_beat(VlWide<16>& dst, const uint8_t* src, size_t n = 64) {
    uint8_t b[64] = {0};
    std::memcpy(b, src, n);
    for (int w = 0; w < 16; w++) {
        uint32_t v;
        std::memcpy(&v, b + 4 * w, 4);
        dst[w] = v;
    }
}
