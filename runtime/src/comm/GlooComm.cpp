// Comm over Gloo's TCP transport: ring collectives on its unbound buffers.
#include "comm/GlooComm.h"
#include "core/Context.h"
#include "core/Dtype.h"
#include "core/FlatShard.h"
#include "io/Manifest.h"
#include "net/Socket.h"

#include <gloo/config.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>

static_assert(GLOO_HAVE_TRANSPORT_TCP, "this Gloo has no TCP transport");

namespace autoshard::rt {

namespace {

using gloo::transport::UnboundBuffer;

/// Milliseconds of a --collective-timeout; 0 (forever) and anything beyond
/// ~30 years become 1e9 s, which Gloo's clock arithmetic still holds.
std::chrono::milliseconds timeoutMillis(double seconds) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(seconds > 0 ? std::min(seconds, 1e9)
                                                : 1e9));
}

/// The blocks a ring moves, in elements: block i is [begin[i], begin[i] +
/// count[i]); together they tile the buffer in order.
struct Blocks {
  std::vector<int64_t> begin, count;
  int64_t total() const { return begin.back() + count.back(); }
  int64_t largest() const {
    return *std::max_element(count.begin(), count.end());
  }
};

Blocks equalBlocks(int64_t each, int n) {
  Blocks b;
  for (int i = 0; i < n; ++i) {
    b.begin.push_back(i * each);
    b.count.push_back(each);
  }
  return b;
}

/// The valid parts of the flat shards of a numel-element tensor over n
/// ranks, which tile it: the padding never travels.
Blocks shardBlocks(int64_t numel, int n) {
  FlatShardLayout layout{numel, n};
  Blocks b;
  for (int i = 0; i < n; ++i) {
    b.begin.push_back(std::min(layout.begin(i), numel));
    b.count.push_back(layout.validCount(i));
  }
  return b;
}

template <typename T, typename F>
void combineAs(void *acc, const void *in, int64_t n, F f) {
  auto *a = static_cast<T *>(acc);
  const auto *b = static_cast<const T *>(in);
  for (int64_t i = 0; i < n; ++i)
    a[i] = f(b[i], a[i]);
}

/// acc = op(in, acc) elementwise. bf16 combines in float and rounds back
/// after each combine, as MPI's and NCCL's bf16 reductions do.
void combine(void *acc, const void *in, int64_t n, asrt_dtype dtype,
             asrt_reduce_op op) {
  auto apply = [&](auto zero) {
    using T = decltype(zero);
    switch (op) {
    case ASRT_REDUCE_SUM:
    case ASRT_REDUCE_AVG:
      return combineAs<T>(acc, in, n, [](T x, T y) { return T(x + y); });
    case ASRT_REDUCE_MAX:
      return combineAs<T>(acc, in, n, [](T x, T y) { return x > y ? x : y; });
    case ASRT_REDUCE_MIN:
      return combineAs<T>(acc, in, n, [](T x, T y) { return x < y ? x : y; });
    }
    fatal("collective: reduce_op %d is not an asrt_reduce_op",
          static_cast<int>(op));
  };
  switch (dtype) {
  case ASRT_DTYPE_F32:
    return apply(0.0f);
  case ASRT_DTYPE_I32:
    return apply(int32_t(0));
  case ASRT_DTYPE_I64:
    return apply(int64_t(0));
  case ASRT_DTYPE_BF16: {
    auto *a = static_cast<uint16_t *>(acc);
    const auto *b = static_cast<const uint16_t *>(in);
    for (int64_t i = 0; i < n; ++i) {
      float x = bf16ToFloat(b[i]), y = bf16ToFloat(a[i]);
      float r = op == ASRT_REDUCE_MAX   ? (x > y ? x : y)
                : op == ASRT_REDUCE_MIN ? (x < y ? x : y)
                                        : x + y;
      a[i] = floatToBf16(r);
    }
    return;
  }
  case ASRT_DTYPE_F16:
  case ASRT_DTYPE_U16:
    break;
  }
  // The ABI checked the reduction (checkReduction) before calling here.
  fatal("collective: cannot reduce dtype %s", dtypeName(dtype));
}

/// One group of the grid: a Gloo transport context over its members,
/// whose ranks in it are their positions in `ranks`.
struct Group {
  std::vector<int> ranks; // world ranks, in group order
  int me = 0;             // this rank's position
  std::shared_ptr<gloo::transport::Context> context;
  /// Collectives run so far: each takes the next range of slots, so that
  /// no message of one is matched by a receive of another.
  uint64_t collectives = 0;
  int size() const { return static_cast<int>(ranks.size()); }
};

/// A step's slot: the collective's sequence number above, the step below.
constexpr int kStepBits = 24;

class GlooComm final : public Comm {
public:
  GlooComm(int rank, int size, std::vector<int64_t> grid,
           std::chrono::milliseconds timeout, double timeoutSeconds)
      : Comm(rank, size, std::move(grid)), timeout(timeout),
        timeoutSeconds(timeoutSeconds) {}

  /// Connects the group of every mask; collective over the world.
  Status connect(ControlPlane &control, const std::string &address);

  void allReduce(const void *send, void *recv, int64_t count, asrt_dtype dtype,
                 asrt_reduce_op op, int32_t mask) override {
    std::lock_guard<std::mutex> lock(mutex);
    Call call{"all_reduce", mask};
    Group &g = group(mask);
    if (send != recv && count > 0)
      std::memcpy(recv, send, count * dtypeSize(dtype));
    Blocks blocks = shardBlocks(count, g.size());
    ringReduceScatter(g, static_cast<char *>(recv), blocks, dtype, op, call);
    ringAllGather(g, static_cast<char *>(recv), blocks, dtypeSize(dtype), call);
    if (op == ASRT_REDUCE_AVG)
      divideByGroup(recv, count, dtype, g.size());
  }

  void allGather(const void *send, void *recv, int64_t sendCount,
                 asrt_dtype dtype, int32_t mask) override {
    std::lock_guard<std::mutex> lock(mutex);
    Group &g = group(mask);
    Blocks blocks = equalBlocks(sendCount, g.size());
    gather(g, send, recv, blocks, dtypeSize(dtype), {"all_gather", mask});
  }

  void reduceScatter(const void *send, void *recv, int64_t recvCount,
                     asrt_dtype dtype, asrt_reduce_op op,
                     int32_t mask) override {
    std::lock_guard<std::mutex> lock(mutex);
    Group &g = group(mask);
    scatter(g, send, recv, equalBlocks(recvCount, g.size()), dtype, op,
            {"reduce_scatter", mask});
  }

  void allGatherShards(const void *shard, void *full, int64_t numel,
                       asrt_dtype dtype, int32_t mask) override {
    std::lock_guard<std::mutex> lock(mutex);
    Group &g = group(mask);
    gather(g, shard, full, shardBlocks(numel, g.size()), dtypeSize(dtype),
           {"all_gather_shards", mask});
  }

  void reduceScatterShards(const void *full, void *shard, int64_t numel,
                           asrt_dtype dtype, asrt_reduce_op op,
                           int32_t mask) override {
    std::lock_guard<std::mutex> lock(mutex);
    Group &g = group(mask);
    scatter(g, full, shard, shardBlocks(numel, g.size()), dtype, op,
            {"reduce_scatter_shards", mask});
  }

  void barrier() override {
    std::lock_guard<std::mutex> lock(mutex);
    // Once a rank has every other rank's byte, each of them has entered.
    Group &g = group(worldMask());
    std::vector<char> bytes(g.size(), 1);
    ringAllGather(g, bytes.data(), equalBlocks(1, g.size()), 1,
                  {"barrier", worldMask()});
  }

private:
  struct Call {
    const char *name;
    int32_t mask;
  };

  int32_t worldMask() const {
    return static_cast<int32_t>((1u << grid().size()) - 1);
  }

  /// The mask without its axes of extent 1, which select the same group:
  /// masks that differ only there share one context.
  int32_t canonical(int32_t mask) const {
    int32_t m = mask;
    for (size_t i = 0; i < grid().size(); ++i)
      if (grid()[i] == 1)
        m &= ~(1 << i);
    return m;
  }

  /// The group of a collective that starts now (each public collective
  /// looks its group up once, first).
  Group &group(int32_t mask) {
    ++collectivesStarted;
    auto it = groups.find(canonical(mask));
    if (it == groups.end())
      fatal("gloo: no group for grid_axes_mask %d of grid %s", mask,
            formatShape(grid()).c_str());
    return it->second;
  }

  std::string describe(const Call &call) const {
    std::string text = std::string("gloo ") + call.name + " over ";
    if (gridGroupSize(grid(), call.mask) == size())
      return text + "the world (" + std::to_string(size()) + " ranks, grid " +
             formatShape(grid()) + ")";
    std::vector<int> ranks = gridGroup(rank(), grid(), call.mask);
    std::string list;
    for (size_t i = 0; i < ranks.size(); ++i)
      list += (i ? ", " : "") + std::to_string(ranks[i]);
    return text + "grid_axes_mask " + std::to_string(call.mask) + " (ranks " +
           list + " of grid " + formatShape(grid()) + ")";
  }

  /// Runs `io` (posting or waiting for one step's receive or send). Gloo
  /// throws when the peer's connection closed (it exited or failed) or a
  /// wait timed out; a wait returns false when aborted.
  template <typename Io>
  void guarded(const Group &g, bool receive, int peer, const Call &call,
               int step, Io io) {
    const char *what = receive ? "receiving from" : "sending to";
    const char *role = receive ? "ring predecessor" : "ring successor";
    int peerRank = g.ranks[peer];
    try {
      if (io())
        return;
      fatal("%s failed: %s rank %d (its %s) was aborted in step %d",
            describe(call).c_str(), what, peerRank, role, step + 1);
    } catch (const std::exception &e) {
      std::string verdict;
      {
        std::lock_guard<std::mutex> lock(waitMutex);
        if (waiting.blocked && waiting.peer == peerRank)
          verdict = "; " + verdictLocked();
      }
      fatal("%s failed: %s rank %d (its %s) in ring step %d: %s%s (a peer "
            "that exited or failed closes its connection at once; one that "
            "hangs is given the collective timeout of %g s)",
            describe(call).c_str(), what, peerRank, role, step + 1, e.what(),
            verdict.c_str(), timeoutSeconds);
    }
  }
  void send(const Group &g, UnboundBuffer &buffer, int peer, uint64_t slot,
            size_t offset, size_t bytes, const Call &call, int step) {
    guarded(g, false, peer, call, step, [&] {
      buffer.send(peer, slot, offset, bytes);
      return true;
    });
  }
  void recv(const Group &g, UnboundBuffer &buffer, int peer, uint64_t slot,
            size_t offset, size_t bytes, const Call &call, int step) {
    guarded(g, true, peer, call, step, [&] {
      buffer.recv(peer, slot, offset, bytes);
      return true;
    });
  }
  void wait(UnboundBuffer &buffer, bool receive, const Group &g, int peer,
            const Call &call, int step) {
    {
      std::lock_guard<std::mutex> lock(waitMutex);
      if (waiting.collective != collectivesStarted) {
        // The first wait of this collective: nothing has passed yet.
        waiting = WaitState{};
        waiting.name = call.name;
        waiting.mask = call.mask;
        waiting.collective = collectivesStarted;
        // The ring step whose block a member sends as it enters: the
        // first of the reduce-scatter, or of the all-gather when that is
        // all the collective runs.
        bool gatherOnly = std::strcmp(call.name, "all_gather") == 0 ||
                          std::strcmp(call.name, "all_gather_shards") == 0 ||
                          std::strcmp(call.name, "barrier") == 0;
        waiting.entryStep = gatherOnly ? g.size() : 1;
        waiting.steps = std::strcmp(call.name, "all_reduce") == 0
                            ? 2 * (g.size() - 1)
                            : g.size() - 1;
      }
      waiting.blocked = true;
      waiting.receive = receive;
      waiting.peer = g.ranks[peer];
      waiting.beyond = g.ranks[receive ? (peer + g.size() - 1) % g.size()
                                       : (peer + 1) % g.size()];
      waiting.step = step + 1;
    }
    guarded(g, receive, peer, call, step, [&] {
      return receive ? buffer.waitRecv(nullptr, timeout)
                     : buffer.waitSend(nullptr, timeout);
    });
    std::lock_guard<std::mutex> lock(waitMutex);
    waiting.blocked = false;
    ++(receive ? waiting.received : waiting.taken);
  }

public:
  /// A ring knows whom it waits for: the one peer of the step it is
  /// blocked in. Whether that peer reached the collective follows from
  /// what passed: a predecessor sends its first block as it enters, so
  /// one from which nothing arrived has not reached it, and one from which
  /// something did is waiting itself, further along the ring.
  std::string describeWait() const override {
    std::lock_guard<std::mutex> lock(waitMutex);
    if (!waiting.blocked)
      return "";
    std::string peer = "rank " + std::to_string(waiting.peer);
    // Counted from the collective's first ring step.
    std::string step = "ring step " +
                       std::to_string(waiting.step - waiting.entryStep + 1) +
                       " of " + std::to_string(waiting.steps);
    std::string what = waiting.receive
                           ? "gloo's ring waits to receive " + step + " from " +
                                 peer + " (its ring predecessor)"
                           : "gloo's ring waits for " + peer +
                                 " (its ring successor) to take its block of " +
                                 step;
    return what + ": " + verdictLocked();
  }

private:
  /// Whether the peer waited for reached the collective, from what passed
  /// between them (under waitMutex, while blocked).
  std::string verdictLocked() const {
    std::string peer = "rank " + std::to_string(waiting.peer);
    std::string beyond = "rank " + std::to_string(waiting.beyond);
    // Only the entry step's block leaves a member before it waits for
    // anything; a later step's may be held up by the member's own wait
    // (when the earlier steps carried no data: fewer elements than
    // members).
    bool atEntry = waiting.step == waiting.entryStep;
    if (waiting.receive) {
      if (waiting.received == 0 && atEntry)
        return "nothing of this collective has arrived from " + peer +
               ": it has not reached it";
      if (waiting.received == 0)
        return "nothing of this collective has arrived from " + peer +
               ", whose earlier ring steps carried no data: it has not "
               "reached it, or waits itself for its own predecessor " +
               beyond;
      return peer + " reached it (" + std::to_string(waiting.received) +
             " of its blocks arrived) and waits itself, for its own "
             "predecessor " +
             beyond + " or one before";
    }
    if (waiting.taken == 0 && atEntry)
      return peer + " has taken nothing of this collective: it has not "
                    "reached it";
    if (waiting.taken == 0)
      return peer +
             " has taken nothing of this collective, whose earlier "
             "ring steps carried no data: it has not reached it, or "
             "waits itself for its own successor " +
             beyond;
    return peer + " reached it (it took " + std::to_string(waiting.taken) +
           " blocks) and waits itself, for its own successor " + beyond +
           " or one after";
  }

  uint64_t slotsOf(Group &g) { return g.collectives++ << kStepBits; }

  /// Ring reduce-scatter in place: afterwards block g.me of `work` holds
  /// the reduction of every member's block g.me; the other blocks hold
  /// partial sums. Step s sends block me - s - 1 to the successor and
  /// adds block me - s - 2 from the predecessor.
  void ringReduceScatter(Group &g, char *work, const Blocks &b,
                         asrt_dtype dtype, asrt_reduce_op op,
                         const Call &call) {
    int n = g.size();
    int64_t es = dtypeSize(dtype);
    uint64_t slots = slotsOf(g);
    int right = (g.me + 1) % n, left = (g.me + n - 1) % n;
    incoming.resize(
        static_cast<size_t>(std::max<int64_t>(b.largest(), 1) * es));
    std::unique_ptr<UnboundBuffer> out = g.context->createUnboundBuffer(
        work, static_cast<size_t>(b.total() * es));
    std::unique_ptr<UnboundBuffer> in =
        g.context->createUnboundBuffer(incoming.data(), incoming.size());
    for (int s = 0; s < n - 1; ++s) {
      int sendBlock = ((g.me - s - 1) % n + n) % n;
      int recvBlock = ((g.me - s - 2) % n + n) % n;
      size_t sendBytes = b.count[sendBlock] * es;
      size_t recvBytes = b.count[recvBlock] * es;
      if (sendBytes)
        send(g, *out, right, slots + s, b.begin[sendBlock] * es, sendBytes,
             call, s);
      if (recvBytes) {
        recv(g, *in, left, slots + s, 0, recvBytes, call, s);
        wait(*in, true, g, left, call, s);
        combine(work + b.begin[recvBlock] * es, incoming.data(),
                b.count[recvBlock], dtype, op);
      }
      if (sendBytes)
        wait(*out, false, g, right, call, s);
    }
  }

  /// Ring all-gather in place: block g.me of `buffer` is this rank's; step
  /// s passes block me - s on and receives block me - s - 1.
  void ringAllGather(Group &g, char *buffer, const Blocks &b, int64_t es,
                     const Call &call) {
    int n = g.size();
    uint64_t slots = slotsOf(g);
    int right = (g.me + 1) % n, left = (g.me + n - 1) % n;
    std::unique_ptr<UnboundBuffer> buf = g.context->createUnboundBuffer(
        buffer, static_cast<size_t>(std::max<int64_t>(b.total() * es, 1)));
    for (int s = 0; s < n - 1; ++s) {
      int sendBlock = ((g.me - s) % n + n) % n;
      int recvBlock = ((g.me - s - 1) % n + n) % n;
      size_t sendBytes = b.count[sendBlock] * es;
      size_t recvBytes = b.count[recvBlock] * es;
      if (sendBytes)
        send(g, *buf, right, slots + s, b.begin[sendBlock] * es, sendBytes,
             call, n - 1 + s);
      if (recvBytes) {
        recv(g, *buf, left, slots + s, b.begin[recvBlock] * es, recvBytes, call,
             n - 1 + s);
        wait(*buf, true, g, left, call, n - 1 + s);
      }
      if (sendBytes)
        wait(*buf, false, g, right, call, n - 1 + s);
    }
  }

  /// `mine` (block g.me's elements) into its place in `full`, then the
  /// ring fills the other blocks.
  void gather(Group &g, const void *mine, void *full, const Blocks &b,
              int64_t es, const Call &call) {
    char *own = static_cast<char *>(full) + b.begin[g.me] * es;
    if (mine != own && b.count[g.me] > 0)
      std::memmove(own, mine, b.count[g.me] * es);
    ringAllGather(g, static_cast<char *>(full), b, es, call);
  }

  /// Reduces `full` (every block) into block g.me, written to `mine`. In
  /// place (full == mine) the input is the whole buffer and the result
  /// lands at its start, as the ABI (and MPI) define it.
  void scatter(Group &g, const void *full, void *mine, const Blocks &b,
               asrt_dtype dtype, asrt_reduce_op op, const Call &call) {
    int64_t es = dtypeSize(dtype);
    size_t bytes = static_cast<size_t>(b.total() * es);
    // The partial sums overwrite the blocks they pass through: work on a
    // copy unless the caller gave its buffer up (in place).
    char *work = static_cast<char *>(mine);
    if (full != mine && bytes > 0) {
      workspace.resize(bytes);
      std::memcpy(workspace.data(), full, bytes);
      work = workspace.data();
    }
    ringReduceScatter(g, work, b, dtype, op, call);
    if (b.count[g.me] > 0)
      std::memmove(mine, work + b.begin[g.me] * es, b.count[g.me] * es);
    if (op == ASRT_REDUCE_AVG)
      divideByGroup(mine, b.count[g.me], dtype, g.size());
  }

  /// What the ring waits for now, for describeWait on another thread.
  struct WaitState {
    const char *name = nullptr;
    int32_t mask = 0;
    uint64_t collective = 0; ///< collectivesStarted when it started
    bool blocked = false;
    bool receive = false;
    int peer = 0;   ///< world rank waited for
    int beyond = 0; ///< the rank that peer waits for in turn
    int step = 0, steps = 0;
    int entryStep = 1; ///< the step a member's first block is sent in
    int64_t received = 0, taken = 0; ///< blocks passed in this collective
  };
  mutable std::mutex waitMutex;
  WaitState waiting;
  uint64_t collectivesStarted = 0; // under `mutex`

  std::chrono::milliseconds timeout;
  double timeoutSeconds;
  std::shared_ptr<gloo::transport::Device> device;
  std::map<int32_t, Group> groups; // by canonical mask
  // One collective at a time (SPMD order is the same on every rank).
  std::mutex mutex;
  std::vector<char> incoming, workspace;
};

/// Appends a 32-bit little-endian value.
void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
bool getU32(const std::string &in, size_t &at, uint32_t &v) {
  if (at + 4 > in.size())
    return false;
  v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i]))
         << (8 * i);
  at += 4;
  return true;
}

Status GlooComm::connect(ControlPlane &control, const std::string &address) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = address;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception &e) {
    return Error("gloo: cannot open a TCP device on " + address + ": " +
                 e.what());
  }
  // Every mask's group, in the same order on every rank: each is one
  // exchange of pair addresses through the control plane. A rank that
  // fails still takes part in every exchange (publishing nothing), so that
  // no peer waits for it; its peers then fail to find its address.
  Status result = Status::success();
  for (int32_t mask = 1; mask <= worldMask(); ++mask) {
    if (canonical(mask) != mask || groupSize(mask) < 2)
      continue;
    Group g;
    g.ranks = groupRanks(mask);
    g.me = groupIndex(mask);
    // Mine: for each peer (by group index), the address of my pair to it.
    std::string mine;
    if (result.ok())
      try {
        g.context = device->createContext(g.me, g.size());
        g.context->setTimeout(timeout);
        for (int peer = 0; peer < g.size(); ++peer) {
          if (peer == g.me)
            continue;
          std::vector<char> bytes =
              g.context->createPair(peer)->address().bytes();
          putU32(mine, static_cast<uint32_t>(peer));
          putU32(mine, static_cast<uint32_t>(bytes.size()));
          mine.append(bytes.begin(), bytes.end());
        }
      } catch (const std::exception &e) {
        result = Error("gloo: cannot create the pairs of grid_axes_mask " +
                       std::to_string(mask) + ": " + e.what());
        mine.clear();
      }
    ControlPlane::Purpose purpose(control,
                                  "connecting gloo's pairs of grid_axes_mask " +
                                      std::to_string(mask));
    std::vector<std::string> all = control.allGather(mine);
    for (int peer = 0; result.ok() && peer < g.size(); ++peer) {
      if (peer == g.me)
        continue;
      int peerRank = g.ranks[peer];
      const std::string &theirs = all[static_cast<size_t>(peerRank)];
      std::vector<char> bytes;
      size_t at = 0;
      uint32_t index = 0, length = 0;
      while (getU32(theirs, at, index) && getU32(theirs, at, length) &&
             at + length <= theirs.size()) {
        if (index == static_cast<uint32_t>(g.me)) {
          bytes.assign(theirs.begin() + at, theirs.begin() + at + length);
          break;
        }
        at += length;
      }
      if (bytes.empty()) {
        result =
            Error("gloo: rank " + std::to_string(peerRank) +
                  " published no address for rank " + std::to_string(rank()) +
                  " in grid_axes_mask " + std::to_string(mask));
        break;
      }
      try {
        // Connects in group order on every rank, as Gloo's own full-mesh
        // rendezvous does; each connect waits at most the timeout.
        g.context->getPair(peer)->connect(bytes);
      } catch (const std::exception &e) {
        result =
            Error("gloo: connecting rank " + std::to_string(rank()) +
                  " to rank " + std::to_string(peerRank) + " (grid_axes_mask " +
                  std::to_string(mask) + "): " + e.what());
      }
    }
    groups.emplace(mask, std::move(g));
  }
  return result;
}

} // namespace

Expected<std::unique_ptr<Comm>> createGlooComm(ControlPlane &control,
                                               const std::vector<int64_t> &grid,
                                               const std::string &peerHost) {
  int64_t product = 1;
  for (int64_t d : grid)
    product *= d;
  if (product != control.size())
    return Error("gloo: grid " + formatShape(grid) + " has " +
                 std::to_string(product) + " ranks but the job has " +
                 std::to_string(control.size()));
  // Gloo 0.5's TCP pairs write with writev, which raises SIGPIPE on a
  // connection a dead peer reset: that would kill this rank silently
  // (status 141) instead of letting the failed write name the peer.
  // Process-wide, because the writes happen on Gloo's own threads too.
  std::signal(SIGPIPE, SIG_IGN);
  Expected<std::string> address =
      net::localAddressTowards(peerHost, "MASTER_ADDR");
  // Every rank learns whether every rank could set up, so that none is
  // left waiting in an exchange another has given up on.
  Status found = agreeOnStatus(address.status(), control);
  if (!found)
    return Error(found.message());
  auto comm = std::make_unique<GlooComm>(control.rank(), control.size(), grid,
                                         timeoutMillis(control.timeout()),
                                         control.timeout());
  Status connected = agreeOnStatus(comm->connect(control, *address), control);
  if (!connected)
    return Error(connected.message());
  return std::unique_ptr<Comm>(std::move(comm));
}

} // namespace autoshard::rt
