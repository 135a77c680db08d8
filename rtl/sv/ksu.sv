// Key search unit (issue 19, Honeycomb §4): searches one accelkv node for a key, reading the
// node bytes exactly as docs/FORMAT.md lays them out.
//
// A node arrives as 64-byte beats (`beat_*`, one per cycle) and is written into eight
// 64-bit-wide banks (bank b holds the 8-byte words whose index is b mod 8), so any 8 bytes
// at any address are one read of two banks: one unaligned 8-byte window per access, two
// cycles from request to use (the banks are synchronous RAMs, block RAM on an FPGA). The
// key arrives the same way (`key_*`). On `start` the unit reads the header (a node newer
// than `rv` with an older version answers that version's arena offset, as Honeycomb's KSU
// sends the request back to visit the old version), the shortcut block (the last boundary key <= the
// search key picks the segment), that segment of the sorted block, and, in a leaf, the whole
// log block (the newest entry for the key whose version <= `rv` wins; a delete marker hides
// the key). Then, for a found value with a deadline, the expiry rule (gone once `now` >
// deadline; `now` = 0 expires nothing).
//
// Answers (`status` with `done`): 0 not found, 1 found (`value_off`: node offset of the
// value's header, as FORMAT.md's `value`), 2 interior (`next`: the child LID to follow), 3
// bad node (a field points outside the node or the kind is unknown), 4 older (`next`: arena
// offset of the node's previous version, to search instead). `leaf`: the node is a leaf.
//
// Keys are compared 8 bytes per access in memcmp order. `cycles` counts cycles from
// `start` to `done`.
module ksu #(
    parameter int NODE_BYTES = 65536,  // largest node size served (power of two)
    parameter int KEY_BYTES = 512  // longest key served (a multiple of 64, at most 512);
                                   // a longer key_len answers 3 (bad)
) (
    input  logic         clk,
    input  logic         rst,
    // node bytes: beat `beat_idx` holds bytes [64 * beat_idx, 64 * beat_idx + 64)
    input  logic         beat_valid,
    /* verilator lint_off UNUSEDSIGNAL */
    input  logic [15:0]  beat_idx,  // bits past the node size are ignored
    /* verilator lint_on UNUSEDSIGNAL */
    input  logic [511:0] beat_data,
    output logic         beat_ready,
    // search key bytes, the same way (at most 460 bytes: 8 beats)
    input  logic         key_valid,
    input  logic [2:0]   key_idx,
    input  logic [511:0] key_data,
    output logic         key_ready,
    // a search
    input  logic         start,
    input  logic [8:0]   key_len,
    input  logic [63:0]  rv,
    input  logic [63:0]  now,
    output logic         done,
    output logic [2:0]   status,
    output logic [31:0]  value_off,
    output logic [63:0]  next,
    output logic         leaf,
    output logic [31:0]  cycles
);
  localparam int ROWS = NODE_BYTES / 64;
  localparam int RW = $clog2(ROWS);
  localparam int KROWS = KEY_BYTES / 64;
  localparam int KW = (KROWS > 1) ? $clog2(KROWS) : 1;

  // ---------------------------------------------------------------- banked memories
  // Bank b holds the 8-byte words whose index is b mod 8: row r of bank b is node bytes
  // [64r + 8b, 64r + 8b + 8). A 64-byte beat is one row of every bank, written in one
  // cycle; any unaligned 8-byte window spans words w and w + 1, which sit in different
  // banks, so it is one read of two banks and a byte shift. The key is only ever read at
  // multiples of 8 (a comparison walks it from byte 0), so its window is one word of one
  // bank, no shift.
  logic [63:0] nq[8];
  logic [63:0] kq[8];
  logic [31:0] rd_addr;  // byte address of the node window asked for
  /* verilator lint_off UNUSEDSIGNAL */
  logic [31:0] krd_addr;  // byte address of the key word asked for (bits 2:0 always 0)
  /* verilator lint_on UNUSEDSIGNAL */

  assign beat_ready = 1'b1;
  assign key_ready = 1'b1;

  /* verilator lint_off UNUSEDSIGNAL */
  wire [28:0] nw0 = rd_addr[31:3];
  wire [28:0] nw1 = nw0 + 29'd1;
  wire [28:0] kw0 = krd_addr[31:3];
  /* verilator lint_on UNUSEDSIGNAL */

  // The banks' outputs are registered (block RAM read ports): a window asked for in one
  // cycle (the address register) is read in the next and used in the one after, so the
  // search stalls a cycle after each request.
  logic [63:0] win, kwin;
  genvar b;
  generate
    for (b = 0; b < 8; b++) begin : g_bank
      logic [63:0] nbank[ROWS];
      logic [63:0] kbank[KROWS];
      wire [RW-1:0] nrow = (nw0[2:0] == 3'(b)) ? nw0[RW+2:3] : nw1[RW+2:3];
      /* verilator lint_off UNUSEDSIGNAL */
      wire [KW-1:0] krow = (KROWS > 1) ? kw0[KW+2:3] : '0;  // unused with one key row
      /* verilator lint_on UNUSEDSIGNAL */
      wire [KW-1:0] kwrow = (KROWS > 1) ? key_idx[KW-1:0] : '0;
      always_ff @(posedge clk) begin
        if (beat_valid) nbank[beat_idx[RW-1:0]] <= beat_data[b*64+:64];
        if (key_valid && {29'd0, key_idx} < 32'(KROWS)) kbank[kwrow] <= key_data[b*64+:64];
      end
      always_ff @(posedge clk) nq[b] <= nbank[nrow];
      // One key row is a register, not a RAM: read it directly (the key does not change
      // during a search, so the word is the same when the search uses it).
      if (KROWS > 1) begin : g_kram
        always_ff @(posedge clk) kq[b] <= kbank[krow];
      end else begin : g_kreg
        assign kq[b] = kbank[0];
      end
    end
  endgenerate

  // The window: the two words, shifted by the address's byte offset. Which banks hold the
  // two words and the shift are registered with the read (from the address the banks were
  // read at), so the window's path starts at the banks' outputs, not at the address
  // arithmetic: the bank outputs and these registers always describe the same address.
  logic [2:0] sel_lo, sel_hi, shift, ksel;
  always_ff @(posedge clk) begin
    sel_lo <= nw0[2:0];
    sel_hi <= nw0[2:0] + 3'd1;
    shift <= rd_addr[2:0];
    ksel <= kw0[2:0];
  end
  wire [127:0] npair = {nq[sel_hi], nq[sel_lo]};
  assign win = npair[{1'b0, shift, 3'b000}+:64];
  assign kwin = kq[ksel];

  // ---------------------------------------------------------------- the search
  typedef enum logic [4:0] {
    IDLE, HDR_REQ, HDR_USE, SC_REQ, SC_USE, SC_CMP, SEG, VAL_REQ, VAL_USE, LID_REQ, LID_USE,
    ITEM_REQ, ITEM_USE, ITEM_CMP, LOG, LOG_REQ, LOG_USE, LOG_KH_USE, LOG_CMP, LOG_NEXT,
    EXP_REQ, EXP_USE, DL_REQ, DL_USE, CMP_REQ, CMP_USE, FINISH
  } state_t;
  state_t st, ret, after_val, after_lid;

  logic [2:0] hdr_i;
  logic [31:0] used, sorted_end, pos, seg_end, q, voff, entry_end;
  logic [15:0] sorted_start;
  logic [63:0] version, old;
  logic [47:0] link, best_child;
  logic [7:0] kind, nsc, sc_i;
  logic [8:0] klen;
  logic have_sc, fk_eq, too_new, etomb;
  logic hit, hit_tomb;  // a log entry (or the sorted item) answered
  logic [31:0] hit_off;
  logic sorted_hit;
  logic [31:0] sorted_off;
  logic [2:0] ans;
  logic stall;  // the window asked for is not read yet

  // Key comparison: node bytes [cmp_a, cmp_a + cmp_len) against the search key.
  logic [31:0] cmp_a;
  logic [8:0] cmp_len, cmp_i;
  logic [1:0] cmp_res;  // 0 less, 1 equal, 2 greater (node key vs search key)
  localparam logic [1:0] LT = 2'd0, EQ = 2'd1, GT = 2'd2;

  // this chunk: n = min(8, cmp_len - cmp_i, key_len - cmp_i) bytes
  logic [8:0] rem_a, rem_k, n;
  logic [1:0] chunk;  // first difference in the chunk (EQ when none)
  always_comb begin
    rem_a = cmp_len - cmp_i;
    rem_k = key_len - cmp_i;
    n = (rem_a < rem_k) ? rem_a : rem_k;
    if (n > 9'd8) n = 9'd8;
    chunk = EQ;
    for (int j = 7; j >= 0; j--) begin
      if (9'(j) < n && win[j*8+:8] != kwin[j*8+:8])
        chunk = (win[j*8+:8] < kwin[j*8+:8]) ? LT : GT;
    end
  end

  // a value's bytes after its header: [deadline] [flags] body
  function automatic logic [31:0] value_size(input logic [15:0] vh);
    value_size = 32'd2 + (vh[14] ? 32'd8 : 32'd0) + (vh[13] ? 32'd4 : 32'd0)
               + (vh[15] ? 32'd12 : {19'd0, vh[12:0]});
  endfunction

  always_ff @(posedge clk) begin
    if (rst) begin
      st <= IDLE;
      done <= 1'b0;
      stall <= 1'b0;
    end else begin
      if (st != IDLE) cycles <= cycles + 32'd1;
      if (stall) stall <= 1'b0;
      else case (st)
        IDLE: begin
          if (start) begin
            done <= 1'b0;
            cycles <= 32'd0;
            hdr_i <= 3'd0;
            st <= HDR_REQ;
          end
        end
        // header: words at 0 (used), 16 (version), 24 (old version), 32 (link, kind), 40
        // (sorted block, nsc)
        HDR_REQ: begin
          case (hdr_i)
            3'd0: rd_addr <= 32'd0;
            3'd1: rd_addr <= 32'd16;
            3'd2: rd_addr <= 32'd24;
            3'd3: rd_addr <= 32'd32;
            default: rd_addr <= 32'd40;
          endcase
          stall <= 1'b1;
          st <= HDR_USE;
        end
        HDR_USE: begin
          case (hdr_i)
            3'd0: used <= win[63:32];
            3'd1: version <= win;
            3'd2: old <= win;
            3'd3: begin
              link <= win[47:0];
              kind <= win[55:48];
            end
            default: begin
              sorted_end <= win[31:0];
              sorted_start <= win[47:32];
              nsc <= win[55:48];
            end
          endcase
          hdr_i <= hdr_i + 3'd1;
          if (hdr_i == 3'd4) begin
            if (version > rv && old != ~64'd0) begin
              // newer than the read version: the older version answers (a walk follows it)
              ans <= 3'd4;
              st <= FINISH;
            end else if ((kind != 8'h4C && kind != 8'h49) || used > NODE_BYTES || win[31:0] > used
                || {23'd0, key_len} > KEY_BYTES
                || {16'd0, win[47:32]} > win[31:0]) begin
              ans <= 3'd3;
              st <= FINISH;
            end else begin
              pos <= 32'd48;
              sc_i <= 8'd0;
              have_sc <= 1'b0;
              fk_eq <= 1'b0;
              sorted_hit <= 1'b0;
              hit <= 1'b0;
              best_child <= link;
              seg_end <= win[31:0] - {16'd0, win[47:32]};
              st <= (win[55:48] == 8'd0) ? SEG : SC_REQ;
            end
          end else st <= HDR_REQ;
        end
        // shortcut block: seg_off:u16 key_len:u16 key
        SC_REQ: begin
          rd_addr <= pos;
          stall <= 1'b1;
          st <= SC_USE;
        end
        SC_USE: begin
          klen <= win[24:16];
          cmp_a <= pos + 32'd4;
          cmp_len <= win[24:16];
          cmp_i <= 9'd0;
          q <= {16'd0, win[15:0]};  // this entry's segment offset
          ret <= SC_CMP;
          st <= CMP_REQ;
        end
        SC_CMP: begin
          if (cmp_res != GT) begin
            have_sc <= 1'b1;
            pos <= pos + 32'd4 + {23'd0, klen};
            fk_eq <= (cmp_res == EQ);
            voff <= q;  // segment start, relative to sorted_start
            sc_i <= sc_i + 8'd1;
            st <= (sc_i + 8'd1 == nsc) ? SEG : SC_REQ;
          end else begin
            seg_end <= q;
            st <= SEG;
          end
        end
        // the chosen segment: its first item's key is the shortcut's
        SEG: begin
          if (!have_sc) begin
            // below every key: a leaf holds no sorted item for it; an interior node routes
            // to its leftmost child (`link`)
            st <= (kind == 8'h4C) ? LOG : FINISH;
            ans <= 3'd2;
          end else begin
            pos <= {16'd0, sorted_start} + voff;
            seg_end <= {16'd0, sorted_start} + seg_end;
            if (kind == 8'h4C) begin
              if (fk_eq) begin
                sorted_hit <= 1'b1;
                sorted_off <= {16'd0, sorted_start} + voff;
                st <= LOG;
              end else begin
                after_val <= ITEM_REQ;
                st <= VAL_REQ;
              end
            end else begin
              after_lid <= ITEM_REQ;
              st <= LID_REQ;
            end
          end
        end
        // skip a value at `pos`
        VAL_REQ: begin
          rd_addr <= pos;
          stall <= 1'b1;
          st <= VAL_USE;
        end
        VAL_USE: begin
          pos <= pos + value_size(win[15:0]);
          st <= after_val;
        end
        // an interior child LID at `pos`: the best so far (its key was <= the search key)
        LID_REQ: begin
          rd_addr <= pos;
          stall <= 1'b1;
          st <= LID_USE;
        end
        LID_USE: begin
          best_child <= win[47:0];
          pos <= pos + 32'd6;
          st <= after_lid;
        end
        // sorted items after the segment's first: key_len:u16 key value|child
        ITEM_REQ: begin
          if (pos >= seg_end) begin
            st <= (kind == 8'h4C) ? LOG : FINISH;
            ans <= 3'd2;
          end else begin
            rd_addr <= pos;
            stall <= 1'b1;
            st <= ITEM_USE;
          end
        end
        ITEM_USE: begin
          klen <= win[8:0];
          cmp_a <= pos + 32'd2;
          cmp_len <= win[8:0];
          cmp_i <= 9'd0;
          ret <= ITEM_CMP;
          st <= CMP_REQ;
        end
        ITEM_CMP: begin
          if (kind == 8'h4C) begin
            if (cmp_res == EQ) begin
              sorted_hit <= 1'b1;
              sorted_off <= pos + 32'd2 + {23'd0, klen};
              st <= LOG;
            end else if (cmp_res == GT) begin
              st <= LOG;
            end else begin
              pos <= pos + 32'd2 + {23'd0, klen};
              after_val <= ITEM_REQ;
              st <= VAL_REQ;
            end
          end else begin
            if (cmp_res == GT) begin
              ans <= 3'd2;
              st <= FINISH;
            end else begin
              pos <= pos + 32'd2 + {23'd0, klen};
              after_lid <= ITEM_REQ;
              st <= LID_REQ;
            end
          end
        end
        // log block: back:u16 hint:u8 vdelta:u40 khdr:u16 key [value]
        LOG: begin
          q <= sorted_end;
          st <= LOG_REQ;
        end
        LOG_REQ: begin
          if (q >= used) begin
            // the newest visible log entry, else the sorted item
            if (hit) begin
              if (hit_tomb) begin
                ans <= 3'd0;
                st <= FINISH;
              end else begin
                voff <= hit_off;
                st <= EXP_REQ;
              end
            end else if (sorted_hit) begin
              voff <= sorted_off;
              st <= EXP_REQ;
            end else begin
              ans <= 3'd0;
              st <= FINISH;
            end
          end else begin
            rd_addr <= q;
            stall <= 1'b1;
            st <= LOG_USE;
          end
        end
        LOG_USE: begin
          // visible at rv? (entries are in version order: the last visible match is newest)
          too_new <= (version + {24'd0, win[63:24]} > rv);
          rd_addr <= q + 32'd8;
          stall <= 1'b1;
          st <= LOG_KH_USE;
        end
        LOG_KH_USE: begin
          klen <= win[8:0];
          etomb <= win[15];
          entry_end <= q + 32'd10 + {23'd0, win[8:0]};
          if (!too_new) begin
            cmp_a <= q + 32'd10;
            cmp_len <= win[8:0];
            cmp_i <= 9'd0;
            ret <= LOG_CMP;
            st <= CMP_REQ;
          end else st <= LOG_CMP;
        end
        LOG_CMP: begin
          if (!too_new && cmp_res == EQ) begin
            hit <= 1'b1;
            hit_tomb <= etomb;
            hit_off <= entry_end;
          end
          if (etomb) begin
            q <= entry_end;
            st <= LOG_REQ;
          end else begin
            pos <= entry_end;
            after_val <= LOG_NEXT;  // then the entry after the value
            st <= VAL_REQ;
          end
        end
        LOG_NEXT: begin
          q <= pos;
          st <= LOG_REQ;
        end
        // expiry: a value with a deadline is gone once now > deadline (now = 0: never)
        EXP_REQ: begin
          rd_addr <= voff;
          stall <= 1'b1;
          st <= EXP_USE;
        end
        EXP_USE: begin
          if (win[14] && now != 64'd0) st <= DL_REQ;
          else begin
            ans <= 3'd1;
            st <= FINISH;
          end
        end
        DL_REQ: begin
          rd_addr <= voff + 32'd2;
          stall <= 1'b1;
          st <= DL_USE;
        end
        DL_USE: begin
          ans <= (now > win) ? 3'd0 : 3'd1;
          st <= FINISH;
        end
        // 8 bytes of node key and search key per access
        CMP_REQ: begin
          rd_addr <= cmp_a + {23'd0, cmp_i};
          stall <= 1'b1;
          krd_addr <= {23'd0, cmp_i};
          st <= CMP_USE;
        end
        CMP_USE: begin
          if (chunk != EQ) begin
            cmp_res <= chunk;
            st <= ret;
          end else if (cmp_i + n == cmp_len || cmp_i + n == key_len) begin
            cmp_res <= (cmp_len < key_len) ? LT : (cmp_len == key_len) ? EQ : GT;
            st <= ret;
          end else begin
            cmp_i <= cmp_i + n;
            st <= CMP_REQ;
          end
        end
        FINISH: begin
          status <= ans;
          value_off <= voff;
          next <= (ans == 3'd4) ? old : {16'd0, best_child};
          leaf <= (kind == 8'h4C);
          done <= 1'b1;
          st <= IDLE;
        end
        default: st <= IDLE;
      endcase
    end
  end
endmodule
