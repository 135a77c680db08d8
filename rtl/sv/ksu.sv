// Key search unit (issue 19, Honeycomb §4): searches one accelkv node for a key, reading the
// node bytes exactly as docs/FORMAT.md lays them out.
//
// A node arrives as 64-byte beats (`beat_*`) and is written into eight byte-wide banks
// (bank b holds the bytes whose address is b mod 8), so any 8 bytes at any address are one
// read of every bank: one unaligned 8-byte window per access, two cycles from request to
// use (the banks are synchronous RAMs, block RAM on an FPGA; a beat takes 8 cycles to
// write, a row of the eight banks per cycle). The key arrives the same way (`key_*`).
// On `start` the unit reads the header, the shortcut block (the last boundary key <= the
// search key picks the segment), that segment of the sorted block, and, in a leaf, the whole
// log block (the newest entry for the key whose version <= `rv` wins; a delete marker hides
// the key). Then, for a found value with a deadline, the expiry rule (gone once `now` >
// deadline; `now` = 0 expires nothing).
//
// Answers (`status` with `done`): 0 not found, 1 found (`value_off`: node offset of the
// value's header, as FORMAT.md's `value`), 2 interior (`child`: the LID to follow), 3 bad
// node (a field points outside the node or the kind is unknown).
//
// Keys are compared 8 bytes per access in memcmp order. `cycles` counts cycles from
// `start` to `done`.
module ksu #(
    parameter int NODE_BYTES = 65536  // largest node size served (power of two)
) (
    input  logic         clk,
    input  logic         rst,
    // node bytes: beat `beat_idx` holds bytes [64 * beat_idx, 64 * beat_idx + 64)
    input  logic         beat_valid,
    input  logic [15:0]  beat_idx,
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
    output logic [1:0]   status,
    output logic [31:0]  value_off,
    output logic [47:0]  child,
    output logic [31:0]  cycles
);
  localparam int ROWS = NODE_BYTES / 8;
  localparam int RW = $clog2(ROWS);
  localparam int KROWS = 64;

  // ---------------------------------------------------------------- banked memories
  logic [7:0] nq[8];
  logic [7:0] kq[8];
  logic [31:0] rd_addr, krd_addr;  // byte addresses of the windows asked for

  // Loading: a beat is latched, then written one row (8 bytes, one per bank) per cycle.
  logic [511:0] lbuf;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [15:0] lbeat;  // bits past the node size are ignored
  /* verilator lint_on UNUSEDSIGNAL */
  logic [3:0] lrow;  // 8 = idle
  logic lkey;

  assign beat_ready = (lrow == 4'd8);
  assign key_ready = (lrow == 4'd8);

  always_ff @(posedge clk) begin
    if (rst) begin
      lrow <= 4'd8;
    end else if (lrow != 4'd8) begin
      lrow <= lrow + 4'd1;
      if (lrow == 4'd7) lrow <= 4'd8;
    end else if (beat_valid) begin
      lbuf <= beat_data;
      lbeat <= beat_idx;
      lkey <= 1'b0;
      lrow <= 4'd0;
    end else if (key_valid) begin
      lbuf <= key_data;
      lbeat <= {13'd0, key_idx};
      lkey <= 1'b1;
      lrow <= 4'd0;
    end
  end

  // Bank b holds byte j = (b - addr) mod 8 of the window; its row is (addr + j) / 8. The
  // banks' outputs are registered (block RAM read ports): a window asked for in one cycle
  // (the address register) is read in the next and used in the one after, so the search
  // stalls a cycle after each request.
  logic [63:0] win, kwin;
  genvar b;
  generate
    for (b = 0; b < 8; b++) begin : g_bank
      wire [2:0] j = 3'(b) - rd_addr[2:0];
      /* verilator lint_off UNUSEDSIGNAL */
      wire [31:0] a = rd_addr + {29'd0, j};
      wire [31:0] ka = krd_addr + {29'd0, 3'(b) - krd_addr[2:0]};
      /* verilator lint_on UNUSEDSIGNAL */
      logic [7:0] nbank[ROWS];
      logic [7:0] kbank[KROWS];
      always_ff @(posedge clk) begin
        if (lrow != 4'd8 && !lkey) nbank[{lbeat[RW-4:0], lrow[2:0]}] <= lbuf[(lrow[2:0]*64+b*8)+:8];
        if (lrow != 4'd8 && lkey) kbank[{lbeat[2:0], lrow[2:0]}] <= lbuf[(lrow[2:0]*64+b*8)+:8];
      end
      always_ff @(posedge clk) begin
        nq[b] <= nbank[a[RW+2:3]];
        kq[b] <= kbank[ka[8:3]];
      end
    end
  endgenerate

  // byte j of a window is bank (addr + j) mod 8
  always_comb begin
    for (int j = 0; j < 8; j++) begin
      win[j*8+:8] = nq[3'(j)+rd_addr[2:0]];
      kwin[j*8+:8] = kq[3'(j)+krd_addr[2:0]];
    end
  end

  // ---------------------------------------------------------------- the search
  typedef enum logic [4:0] {
    IDLE, HDR_REQ, HDR_USE, SC_REQ, SC_USE, SC_CMP, SEG, VAL_REQ, VAL_USE, LID_REQ, LID_USE,
    ITEM_REQ, ITEM_USE, ITEM_CMP, LOG, LOG_REQ, LOG_USE, LOG_KH_USE, LOG_CMP, LOG_NEXT,
    EXP_REQ, EXP_USE, DL_REQ, DL_USE, CMP_REQ, CMP_USE, FINISH
  } state_t;
  state_t st, ret, after_val, after_lid;

  logic [1:0] hdr_i;
  logic [31:0] used, sorted_end, pos, seg_end, q, voff, entry_end;
  logic [15:0] sorted_start;
  logic [63:0] version;
  logic [47:0] link, best_child;
  logic [7:0] kind, nsc, sc_i;
  logic [8:0] klen;
  logic have_sc, fk_eq, too_new, etomb;
  logic hit, hit_tomb;  // a log entry (or the sorted item) answered
  logic [31:0] hit_off;
  logic sorted_hit;
  logic [31:0] sorted_off;
  logic [1:0] ans;
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

  // a value's bytes after its header: [deadline] body
  function automatic logic [31:0] value_size(input logic [15:0] vh);
    value_size = 32'd2 + (vh[14] ? 32'd8 : 32'd0) + (vh[15] ? 32'd12 : {18'd0, vh[13:0]});
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
            hdr_i <= 2'd0;
            st <= HDR_REQ;
          end
        end
        // header: words at 0 (used), 16 (version), 32 (link, kind), 40 (sorted block, nsc)
        HDR_REQ: begin
          case (hdr_i)
            2'd0: rd_addr <= 32'd0;
            2'd1: rd_addr <= 32'd16;
            2'd2: rd_addr <= 32'd32;
            default: rd_addr <= 32'd40;
          endcase
          stall <= 1'b1;
          st <= HDR_USE;
        end
        HDR_USE: begin
          case (hdr_i)
            2'd0: used <= win[63:32];
            2'd1: version <= win;
            2'd2: begin
              link <= win[47:0];
              kind <= win[55:48];
            end
            default: begin
              sorted_end <= win[31:0];
              sorted_start <= win[47:32];
              nsc <= win[55:48];
            end
          endcase
          hdr_i <= hdr_i + 2'd1;
          if (hdr_i == 2'd3) begin
            if ((kind != 8'h4C && kind != 8'h49) || used > NODE_BYTES || win[31:0] > used
                || {16'd0, win[47:32]} > win[31:0]) begin
              ans <= 2'd3;
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
            ans <= 2'd2;
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
            ans <= 2'd2;
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
              ans <= 2'd2;
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
                ans <= 2'd0;
                st <= FINISH;
              end else begin
                voff <= hit_off;
                st <= EXP_REQ;
              end
            end else if (sorted_hit) begin
              voff <= sorted_off;
              st <= EXP_REQ;
            end else begin
              ans <= 2'd0;
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
            ans <= 2'd1;
            st <= FINISH;
          end
        end
        DL_REQ: begin
          rd_addr <= voff + 32'd2;
          stall <= 1'b1;
          st <= DL_USE;
        end
        DL_USE: begin
          ans <= (now > win) ? 2'd0 : 2'd1;
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
          child <= best_child;
          done <= 1'b1;
          st <= IDLE;
        end
        default: st <= IDLE;
      endcase
    end
  end
endmodule
