// Tree-walk engine (issue 19; Honeycomb §4's memory access generator and key search units,
// KV-Direct's out-of-order completion): many GETs in flight, each walking from the root LID
// to a leaf through a memory with latency, answered in whatever order they finish.
//
// * Request table: SLOTS entries (`cfg_slots` of them in use). The host writes a request's
//   key into the slot the engine offers (`in_slot`, `in_key_*`) and starts it with
//   `in_valid`; the slot holds the request's state, LID or arena offset, read version, clock
//   and the answer until it leaves on `out_*`.
// * Memory-request generator: each cycle it takes one slot that needs memory, from a
//   rotating start: a page-table read (LID -> arena offset of the newest buffer) or a node
//   read (arena offset -> the node's beats, up to its `used`). Requests carry the slot as
//   their tag; the memory answers them in any order (`mresp_*`, one 64-byte beat a cycle).
// * Key search units: NKSU of them (`cfg_ksus` in use), each with a node buffer of its own
//   (the unit's banks). A node read goes to a unit reserved for the slot; its beats stream
//   into the unit's banks while the slot's key is copied in; then the unit searches. A
//   node newer than the read version sends the slot back for its older version; an interior
//   node sends it back for the child's page-table entry; a leaf answers.
// * Interior-node cache: a unit keeps the node it searched, tagged with its arena offset. A
//   slot that needs a node an idle unit holds takes that unit with no memory read. A miss
//   takes an idle unit holding nothing, else one holding a leaf, else the least recently
//   used (so the root and upper levels stay). `flush` forgets every tag: between batches,
//   when buffers the host freed may be reused (within a batch the host keeps them alive).
// * Out-of-order completion: any slot whose answer is ready leaves on `out_*` (one a
//   cycle), whatever order the requests came in.
//
// Answers (`out_status`): the key search unit's (0 not found, 1 found at `out_value_off` in
// the node at arena offset `out_node`, 3 bad node), plus 3 for an unmapped LID or a walk
// deeper than 64 nodes. `out_node` is the leaf the key routes to at the read version in
// every leaf answer (a scan starts there).
module walk #(
    parameter int NODE_BYTES = 65536,
    parameter int SLOTS = 64,
    parameter int NKSU = 32
) (
    input  logic         clk,
    input  logic         rst,
    input  logic [7:0]   cfg_slots,  // request-table entries in use (1..SLOTS)
    input  logic [7:0]   cfg_ksus,   // key search units in use (1..NKSU)
    input  logic         flush,
    input  logic [63:0]  root_lid,
    // requests
    output logic         in_ready,
    output logic [7:0]   in_slot,
    input  logic         in_key_valid,
    input  logic [2:0]   in_key_idx,
    input  logic [511:0] in_key_data,
    input  logic         in_valid,
    input  logic [31:0]  in_tag,
    input  logic [8:0]   in_key_len,
    input  logic [63:0]  in_rv,
    input  logic [63:0]  in_now,
    // memory requests (registered; the memory accepts one a cycle)
    output logic         mreq_valid,
    output logic         mreq_pt,    // 1: page-table entry of LID `mreq_addr`
    output logic [63:0]  mreq_addr,  // LID, or the node's arena offset
    output logic [7:0]   mreq_tag,
    // memory responses, any order: a page-table read answers one beat (data[63:0]: the
    // offset, all ones when unmapped), a node read its beats 0.. in order, `mresp_last`
    // on the final one
    input  logic         mresp_valid,
    input  logic         mresp_pt,
    /* verilator lint_off UNUSEDSIGNAL */
    input  logic [7:0]   mresp_tag,  // bits past the table size are ignored
    /* verilator lint_on UNUSEDSIGNAL */
    input  logic [15:0]  mresp_idx,
    input  logic [511:0] mresp_data,
    input  logic         mresp_last,
    // completions
    output logic         out_valid,
    output logic [31:0]  out_tag,
    output logic [2:0]   out_status,
    output logic [63:0]  out_node,
    output logic [31:0]  out_value_off,
    output logic [31:0]  out_cycles,  // from `in_valid` to `out_valid`
    output logic [7:0]   out_visits,  // nodes searched
    // counters since reset
    output logic [63:0]  n_cycles,
    output logic [63:0]  n_node_reads,
    output logic [63:0]  n_pt_reads,
    output logic [63:0]  n_cache_hits,
    output logic [63:0]  n_beats,
    output logic [63:0]  n_busy  // sum over cycles of units reserved
);
  localparam int SW = $clog2(SLOTS);
  localparam int KW = $clog2(NKSU);
  localparam logic [63:0] UNMAPPED = ~64'd0;

  typedef enum logic [2:0] {FREE, PT_REQ, PT_WAIT, NODE_REQ, LOADING, SEARCH, DONE} sst_t;

  // ---------------------------------------------------------------- request table
  sst_t        s_st[SLOTS];
  logic [31:0] s_tag[SLOTS];
  logic [8:0]  s_klen[SLOTS];
  logic [63:0] s_rv[SLOTS], s_now[SLOTS], s_addr[SLOTS];
  logic [KW-1:0] s_ksu[SLOTS];
  logic [63:0] s_t0[SLOTS];
  logic [7:0]  s_visits[SLOTS];
  logic [2:0]  s_status[SLOTS];
  logic [31:0] s_voff[SLOTS];
  logic [63:0] s_node[SLOTS];
  logic [511:0] keymem[SLOTS][8];

  // ---------------------------------------------------------------- key search units
  logic        k_busy[NKSU], k_started[NKSU], k_loaded[NKSU], k_tagv[NKSU], k_leaf[NKSU];
  logic [SW-1:0] k_slot[NKSU];
  logic [63:0] k_off[NKSU], k_stamp[NKSU];
  logic [3:0]  k_keyi[NKSU], k_keyn[NKSU];

  logic        u_beat_valid[NKSU], u_key_valid[NKSU], u_start[NKSU], u_done[NKSU];
  logic [2:0]  u_status[NKSU];
  logic [31:0] u_voff[NKSU];
  logic [63:0] u_next[NKSU];
  logic        u_leaf[NKSU];
  logic [511:0] u_key_data[NKSU];

  genvar gi;
  generate
    for (gi = 0; gi < NKSU; gi++) begin : g_ksu
      /* verilator lint_off UNUSEDSIGNAL */
      logic [31:0] cyc;
      logic br, kr;
      /* verilator lint_on UNUSEDSIGNAL */
      assign u_beat_valid[gi] = mresp_valid && !mresp_pt && k_busy[gi]
          && k_slot[gi] == mresp_tag[SW-1:0];
      assign u_key_valid[gi] = k_busy[gi] && k_keyi[gi] != k_keyn[gi];
      assign u_key_data[gi] = keymem[k_slot[gi]][k_keyi[gi][2:0]];
      assign u_start[gi] = k_busy[gi] && !k_started[gi] && k_loaded[gi]
          && k_keyi[gi] == k_keyn[gi];
      ksu #(.NODE_BYTES(NODE_BYTES)) u (
          .clk(clk), .rst(rst),
          .beat_valid(u_beat_valid[gi]), .beat_idx(mresp_idx), .beat_data(mresp_data),
          .beat_ready(br),
          .key_valid(u_key_valid[gi]), .key_idx(k_keyi[gi][2:0]), .key_data(u_key_data[gi]),
          .key_ready(kr),
          .start(u_start[gi]), .key_len(s_klen[k_slot[gi]]), .rv(s_rv[k_slot[gi]]),
          .now(s_now[k_slot[gi]]),
          .done(u_done[gi]), .status(u_status[gi]), .value_off(u_voff[gi]),
          .next(u_next[gi]), .leaf(u_leaf[gi]), .cycles(cyc)
      );
    end
  endgenerate

  // ---------------------------------------------------------------- choices of this cycle
  // A unit for a node read: an idle unit already holding the node (a hit), else the victim
  // (idle; empty, else a leaf, else least recently used). An interior node is evicted only
  // while more than half the units hold interior nodes: when every unit is busy the one that
  // finishes would otherwise always be the victim, and the upper levels would never stay.
  logic any_idle, victim_ok;
  logic [KW-1:0] victim;
  always_comb begin
    logic [1:0] best_rank, rank;
    logic [63:0] best_stamp;
    logic [8:0] inner;
    any_idle = 1'b0;
    inner = '0;
    rank = 2'd0;
    victim = '0;
    best_rank = 2'd0;
    best_stamp = '1;
    for (int i = 0; i < NKSU; i++) begin
      if (8'(i) < cfg_ksus && k_tagv[i] && !k_leaf[i]) inner = inner + 9'd1;
      if (8'(i) < cfg_ksus && !k_busy[i]) begin
        rank = !k_tagv[i] ? 2'd3 : k_leaf[i] ? 2'd2 : 2'd1;
        if (!any_idle || rank > best_rank || (rank == best_rank && k_stamp[i] < best_stamp)) begin
          victim = KW'(i);
          best_rank = rank;
          best_stamp = k_stamp[i];
        end
        any_idle = 1'b1;
      end
    end
    victim_ok = any_idle && (best_rank != 2'd1 || {inner[7:0], 1'b0} > {1'b0, cfg_ksus});
  end

  // The generator's slot: the first from `rr` that needs a page-table read, or a node when
  // a unit is idle.
  logic [SW-1:0] rr;
  logic pick_ok;
  logic [SW-1:0] pick;
  always_comb begin
    pick_ok = 1'b0;
    pick = '0;
    for (int j = 0; j < SLOTS; j++) begin
      logic [SW-1:0] s;
      s = rr + SW'(j);
      if (!pick_ok && 8'(s) < cfg_slots
          && (s_st[s] == PT_REQ || (s_st[s] == NODE_REQ && any_idle))) begin
        pick_ok = 1'b1;
        pick = s;
      end
    end
  end

  logic hit_ok;
  logic [KW-1:0] hit_u;
  always_comb begin
    hit_ok = 1'b0;
    hit_u = '0;
    for (int i = 0; i < NKSU; i++) begin
      if (!hit_ok && 8'(i) < cfg_ksus && !k_busy[i] && k_tagv[i] && k_off[i] == s_addr[pick]) begin
        hit_ok = 1'b1;
        hit_u = KW'(i);
      end
    end
  end

  // a free slot for the next request, and a finished one to answer
  logic free_ok, done_ok;
  logic [SW-1:0] free_s, done_s;
  always_comb begin
    free_ok = 1'b0;
    free_s = '0;
    done_ok = 1'b0;
    done_s = '0;
    for (int j = 0; j < SLOTS; j++) begin
      if (!free_ok && 8'(j) < cfg_slots && s_st[j] == FREE) begin
        free_ok = 1'b1;
        free_s = SW'(j);
      end
      if (!done_ok && s_st[j] == DONE) begin
        done_ok = 1'b1;
        done_s = SW'(j);
      end
    end
  end

  logic alloc_ok;
  logic [SW-1:0] alloc_s;
  assign in_ready = alloc_ok;
  assign in_slot = 8'(alloc_s);

  // ---------------------------------------------------------------- state
  always_ff @(posedge clk) begin
    if (in_key_valid && alloc_ok) keymem[alloc_s][in_key_idx] <= in_key_data;
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      for (int j = 0; j < SLOTS; j++) s_st[j] <= FREE;
      for (int i = 0; i < NKSU; i++) begin
        k_busy[i] <= 1'b0;
        k_started[i] <= 1'b0;
        k_tagv[i] <= 1'b0;
        k_stamp[i] <= '0;
      end
      alloc_ok <= 1'b0;
      rr <= '0;
      mreq_valid <= 1'b0;
      out_valid <= 1'b0;
      n_cycles <= '0;
      n_node_reads <= '0;
      n_pt_reads <= '0;
      n_cache_hits <= '0;
      n_beats <= '0;
      n_busy <= '0;
    end else begin
      n_cycles <= n_cycles + 64'd1;
      begin
        logic [63:0] busy;
        busy = '0;
        for (int i = 0; i < NKSU; i++) busy = busy + {63'd0, k_busy[i]};
        n_busy <= n_busy + busy;
      end

      // a new request
      if (!alloc_ok) begin
        alloc_ok <= free_ok;
        alloc_s <= free_s;
      end else if (in_valid) begin
        s_st[alloc_s] <= PT_REQ;
        s_addr[alloc_s] <= root_lid;
        s_tag[alloc_s] <= in_tag;
        s_klen[alloc_s] <= in_key_len;
        s_rv[alloc_s] <= in_rv;
        s_now[alloc_s] <= in_now;
        s_t0[alloc_s] <= n_cycles;
        s_visits[alloc_s] <= 8'd0;
        alloc_ok <= 1'b0;
      end

      // memory responses
      if (mresp_valid) begin
        n_beats <= n_beats + 64'd1;
        if (mresp_pt) begin
          if (mresp_data[63:0] == UNMAPPED) begin
            s_status[mresp_tag[SW-1:0]] <= 3'd3;
            s_node[mresp_tag[SW-1:0]] <= UNMAPPED;
            s_st[mresp_tag[SW-1:0]] <= DONE;
          end else begin
            s_addr[mresp_tag[SW-1:0]] <= mresp_data[63:0];
            s_st[mresp_tag[SW-1:0]] <= NODE_REQ;
          end
        end else if (mresp_last) begin
          k_loaded[s_ksu[mresp_tag[SW-1:0]]] <= 1'b1;
        end
      end

      // the units: key copies, starts, answers
      for (int i = 0; i < NKSU; i++) begin
        if (u_key_valid[i]) k_keyi[i] <= k_keyi[i] + 4'd1;
        if (u_start[i]) begin
          k_started[i] <= 1'b1;
          s_st[k_slot[i]] <= SEARCH;
        end
        if (k_busy[i] && k_started[i] && u_done[i]) begin
          k_busy[i] <= 1'b0;
          k_started[i] <= 1'b0;
          k_leaf[i] <= u_leaf[i];
          k_stamp[i] <= n_cycles;
          s_visits[k_slot[i]] <= s_visits[k_slot[i]] + 8'd1;
          if (u_status[i] == 3'd4) begin
            s_addr[k_slot[i]] <= u_next[i];
            s_st[k_slot[i]] <= NODE_REQ;
          end else if (u_status[i] == 3'd2 && s_visits[k_slot[i]] < 8'd63) begin
            s_addr[k_slot[i]] <= u_next[i];
            s_st[k_slot[i]] <= PT_REQ;
          end else begin
            s_status[k_slot[i]] <= (u_status[i] == 3'd2) ? 3'd3 : u_status[i];
            s_voff[k_slot[i]] <= u_voff[i];
            s_node[k_slot[i]] <= k_off[i];
            s_st[k_slot[i]] <= DONE;
          end
        end
      end

      // the memory-request generator
      mreq_valid <= 1'b0;
      if (pick_ok) begin
        rr <= pick + SW'(1);
        if (s_st[pick] == PT_REQ) begin
          mreq_valid <= 1'b1;
          mreq_pt <= 1'b1;
          mreq_addr <= s_addr[pick];
          mreq_tag <= 8'(pick);
          n_pt_reads <= n_pt_reads + 64'd1;
          s_st[pick] <= PT_WAIT;
        end else if (hit_ok || victim_ok) begin
          logic [KW-1:0] u;
          u = hit_ok ? hit_u : victim;
          k_busy[u] <= 1'b1;
          k_started[u] <= 1'b0;
          k_slot[u] <= pick;
          k_keyi[u] <= 4'd0;
          k_keyn[u] <= 4'((({1'b0, s_klen[pick]} + 10'd63) >> 6));
          k_stamp[u] <= n_cycles;
          s_ksu[pick] <= u;
          s_st[pick] <= LOADING;
          if (hit_ok) begin
            k_loaded[u] <= 1'b1;
            n_cache_hits <= n_cache_hits + 64'd1;
          end else begin
            k_loaded[u] <= 1'b0;
            k_tagv[u] <= 1'b1;
            k_off[u] <= s_addr[pick];
            mreq_valid <= 1'b1;
            mreq_pt <= 1'b0;
            mreq_addr <= s_addr[pick];
            mreq_tag <= 8'(pick);
            n_node_reads <= n_node_reads + 64'd1;
          end
        end
      end

      // one answer a cycle
      out_valid <= 1'b0;
      if (done_ok) begin
        out_valid <= 1'b1;
        out_tag <= s_tag[done_s];
        out_status <= s_status[done_s];
        out_node <= s_node[done_s];
        out_value_off <= s_voff[done_s];
        out_cycles <= 32'(n_cycles - s_t0[done_s]);
        out_visits <= s_visits[done_s];
        s_st[done_s] <= FREE;
      end

      if (flush) for (int i = 0; i < NKSU; i++) k_tagv[i] <= 1'b0;
    end
  end
endmodule
