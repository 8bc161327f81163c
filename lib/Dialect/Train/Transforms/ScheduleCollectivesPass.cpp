//===- ScheduleCollectivesPass.cpp - overlap collectives with compute -----===//
//
// Splits every collective into a start and a wait and moves them apart: a
// reduction starts as soon as its inputs exist, a parameter gather starts
// `prefetch-depth` gathers ahead of its use, and every wait sits right
// before the first reader of its results.
//
//===----------------------------------------------------------------------===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/Transforms/OpOrder.h"
#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace autoshard::train {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVESPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// What a collective op issues, if it can run asynchronously.
struct Issue {
  CollectiveKind kind;
  std::optional<Reduction> reduction;
  StringRef grid;
  SmallVector<int16_t> axes;
};

std::optional<Issue> describe(Operation *op) {
  if (auto allReduce = dyn_cast<shard::AllReduceOp>(op)) {
    shard::ReductionKind kind = allReduce.getReduction();
    if ((kind != shard::ReductionKind::Sum &&
         kind != shard::ReductionKind::Average) ||
        allReduce.getInput().getType() != allReduce.getResult().getType())
      return std::nullopt;
    return Issue{CollectiveKind::AllReduce,
                 kind == shard::ReductionKind::Average ? Reduction::Average
                                                       : Reduction::Sum,
                 allReduce.getGrid(),
                 SmallVector<int16_t>(allReduce.getGridAxes().begin(),
                                      allReduce.getGridAxes().end())};
  }
  if (auto bucket = dyn_cast<AllReduceBucketOp>(op))
    return Issue{CollectiveKind::AllReduce, bucket.getReduction(),
                 bucket.getGrid(), SmallVector<int16_t>(bucket.getGridAxes())};
  if (auto gather = dyn_cast<AllGatherShardsOp>(op))
    return Issue{CollectiveKind::AllGatherShards, std::nullopt,
                 gather.getGrid(), SmallVector<int16_t>(gather.getGridAxes())};
  if (auto scatter = dyn_cast<ReduceScatterShardsOp>(op))
    return Issue{CollectiveKind::ReduceScatterShards, scatter.getReduction(),
                 scatter.getGrid(),
                 SmallVector<int16_t>(scatter.getGridAxes())};
  return std::nullopt;
}

/// The op of `block` that is or contains `op`.
Operation *inBlock(Block &block, Operation *op) {
  return block.findAncestorOpInBlock(*op);
}

/// A value the step has from its start: an argument, a cast of one (a
/// sharded master weight's bf16 compute copy), or a transfer of one (an
/// offloaded shard read from its file or copied to the device), which can
/// move to any point with the ops that make it.
bool isStepState(Value v, Block &body) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == &body;
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != &body)
    return false;
  if (auto cast = dyn_cast<CastOp>(def))
    return isStepState(cast.getInput(), body);
  // A transfer before splitTransfers (the collectives are split first), or
  // the wait of one after.
  if (auto wait = dyn_cast<TransferWaitOp>(def))
    def = wait.getHandle().getDefiningOp();
  std::optional<Transfer> transfer = def ? getTransfer(def) : std::nullopt;
  return transfer && transfer->kind != TransferKind::NvmeWrite &&
         isStepState(transfer->input, body);
}

/// An offload transfer split into a start and a wait.
struct TransferPair {
  TransferStartOp start;
  TransferWaitOp wait;
};

struct Pair {
  CollectiveStartOp start;
  CollectiveWaitOp wait;
  /// A gather of step state (parameters), started ahead of its use.
  bool prefetch;
};

class Scheduler {
public:
  Scheduler(Block &body, int64_t depth)
      : body(body), depth(depth), order(body) {}

  void run() {
    split();
    splitTransfers();
    issueReductionsEarly();
    limitReductionsInFlight();
    sumSquaresAfterWaits();
    prefetchGathers();
    scheduleTransfers();
  }

private:
  /// Every collective becomes a start where it was and a wait right before
  /// the first reader of its results. A copy of a result to the host
  /// (autoshard-offload puts it right after the collective) is no such
  /// reader: it moves right after the wait, which then sits before the
  /// first reader of the copy instead, so that copying a reduced gradient
  /// does not end its reduction's overlap. Nor is the clipping norm's
  /// partial sum of results that are copied (autoshard-offload puts it
  /// after the copies): it follows the copies.
  void split() {
    // Collected first: the copies moved below would take the iteration
    // past the ops between them and the wait.
    SmallVector<std::pair<Operation *, Issue>> collectives;
    for (Operation &op : body)
      if (std::optional<Issue> issue = describe(&op))
        collectives.push_back({&op, std::move(*issue)});
    for (auto &[collective, issue] : collectives) {
      Operation &op = *collective;
      Operation *firstReader = body.getTerminator();
      auto noteReader = [&](Operation *user) {
        Operation *reader = inBlock(body, user);
        if (reader && order.isBefore(reader, firstReader))
          firstReader = reader;
      };
      llvm::SetVector<Operation *> hostCopies, partialNorms;
      for (Value result : op.getResults())
        for (Operation *user : result.getUsers()) {
          bool copy = isa<ToHostOp>(user);
          if ((copy || isPartialNorm(user, &op)) &&
              user->getBlock() == &body) {
            (copy ? hostCopies : partialNorms).insert(user);
            for (Operation *rideReader : user->getResult(0).getUsers())
              noteReader(rideReader);
            continue;
          }
          noteReader(user);
        }
      OpBuilder b(&op);
      auto pending = PendingType::get(op.getContext(),
                                      llvm::to_vector(op.getResultTypes()));
      ReductionAttr reduction =
          issue.reduction
              ? ReductionAttr::get(op.getContext(), *issue.reduction)
              : ReductionAttr();
      auto start = CollectiveStartOp::create(b, op.getLoc(), pending,
                                             issue.kind, op.getOperands(),
                                             issue.grid, issue.axes, reduction);
      order.inserted(start);
      b.setInsertionPoint(firstReader);
      auto wait = CollectiveWaitOp::create(b, op.getLoc(), start.getHandle());
      order.inserted(wait);
      op.replaceAllUsesWith(wait.getResults());
      SmallVector<Operation *> copies = hostCopies.takeVector();
      llvm::sort(copies, [&](Operation *a, Operation *b) {
        return order.isBefore(a, b);
      });
      Operation *after = wait;
      for (Operation *copy : copies) {
        order.moveAfter(copy, after);
        after = copy;
      }
      for (Operation *partial : partialNorms) {
        order.moveAfter(partial, after);
        after = partial;
        partialNormsAfter.push_back({partial, wait});
      }
      bool prefetch = issue.kind == CollectiveKind::AllGatherShards &&
                      llvm::all_of(start.getInputs(), [&](Value v) {
                        return isStepState(v, body);
                      });
      pairs.push_back({start, wait, prefetch});
      order.erased(&op);
      op.erase();
    }
  }

  /// A sum of squares of results of `collective` that each cross to the
  /// host: the part of the clipping norm that autoshard-offload computes
  /// where a reduction's gradients are copied.
  static bool isPartialNorm(Operation *user, Operation *collective) {
    return isa<SumOfSquaresOp>(user) &&
           llvm::all_of(user->getOperands(), [&](Value input) {
             return input.getDefiningOp() == collective &&
                    llvm::any_of(input.getUsers(), llvm::IsaPred<ToHostOp>);
           });
  }

  /// A partial sum of the clipping norm follows its reduction's wait, which
  /// limitReductionsInFlight may have moved earlier since split, as the
  /// copies do (scheduleTransfers): the gradients' device buffers then die
  /// once their copies and the sum are done, not at the norm's total after
  /// the backward pass.
  void sumSquaresAfterWaits() {
    for (auto [partial, wait] : partialNormsAfter)
      order.moveAfter(partial, wait);
  }

  /// A reduction (and a gather of computed values) starts as soon as the
  /// last of its inputs is computed.
  void issueReductionsEarly() {
    for (Pair &pair : pairs) {
      if (pair.prefetch)
        continue;
      Operation *latest = nullptr;
      for (Value input : pair.start.getInputs())
        if (Operation *def = input.getDefiningOp())
          if (!latest || order.isBefore(latest, def))
            latest = def;
      if (latest)
        order.moveAfter(pair.start, latest);
      else
        moveToFront(pair.start);
    }
  }

  /// At most `depth` reductions are in flight: the k-th is waited, at the
  /// latest, when the (k + depth)-th starts. A gradient bucket's full
  /// gradients live until its wait, so this bounds their memory to a few
  /// buckets while each still runs during the backward compute that
  /// produces the next.
  void limitReductionsInFlight() {
    SmallVector<Pair *> reductions;
    for (Pair &pair : pairs)
      if (!pair.prefetch)
        reductions.push_back(&pair);
    limitInFlight<Pair>(reductions);
  }

  /// At most `depth` of `started` are in flight: in the order of their
  /// starts, the k-th is waited, at the latest, when the (k + depth)-th
  /// starts; depth 0 waits each right after its start.
  template <typename PairT>
  void limitInFlight(MutableArrayRef<PairT *> started) {
    llvm::sort(started, [&](PairT *a, PairT *b) {
      return order.isBefore(a->start, b->start);
    });
    for (auto [i, pair] : llvm::enumerate(started)) {
      Operation *wait = pair->wait;
      if (depth == 0) {
        order.moveAfter(wait, pair->start);
        continue;
      }
      if (i + depth >= started.size())
        continue;
      Operation *next = started[i + depth]->start;
      if (order.isBefore(next, wait))
        order.moveBefore(wait, next);
    }
  }

  /// Moves `op` to the start of the step, after the ops already moved
  /// there, so that collectives keep their issue order. An op already
  /// before the last of them (a transfer hoisted with the gather it feeds)
  /// stays: it is at the front, and its readers may be too.
  void moveToFront(Operation *op) {
    if (front && order.isBefore(op, front))
      return;
    if (front)
      order.moveAfter(op, front);
    else
      order.moveBefore(op, &body.front());
    front = op;
  }

  /// Moves the ops that compute `op`'s operands, and theirs, before `op`
  /// where they are after it (the casts and transfers of step state).
  void hoistProducers(Operation *op) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || def->getBlock() != op->getBlock() || order.isBefore(def, op))
        continue;
      order.moveBefore(def, op);
      hoistProducers(def);
    }
  }

  /// The k-th gather of parameters starts when the (k - depth)-th is
  /// waited, so at most `depth` gathers are in flight ahead of the one in
  /// use; depth 0 starts each right before its wait.
  void prefetchGathers() {
    SmallVector<Pair *> gathers;
    for (Pair &pair : pairs)
      if (pair.prefetch)
        gathers.push_back(&pair);
    llvm::sort(gathers, [&](Pair *a, Pair *b) {
      return order.isBefore(a->wait, b->wait);
    });
    for (auto [i, pair] : llvm::enumerate(gathers)) {
      Operation *start = pair->start;
      if (depth == 0)
        order.moveBefore(start, pair->wait);
      else if (static_cast<int64_t>(i) >= depth)
        order.moveAfter(start, gathers[i - depth]->wait);
      else
        moveToFront(start);
      // A bf16 copy of a sharded master weight is cast, and an offloaded
      // shard read or copied, just before its gather starts.
      hoistProducers(start);
    }
  }

  /// Every offload transfer (to_host, to_device, nvme_read, nvme_write)
  /// becomes a start where it was and a wait right before the first reader
  /// of its result (the return, for an NVMe write).
  void splitTransfers() {
    for (Operation &op : llvm::make_early_inc_range(body)) {
      std::optional<Transfer> transfer = getTransfer(&op);
      if (!transfer || isa<TransferStartOp>(op))
        continue;
      Operation *firstReader = body.getTerminator();
      for (Operation *user : op.getResult(0).getUsers()) {
        Operation *reader = inBlock(body, user);
        if (reader && order.isBefore(reader, firstReader))
          firstReader = reader;
      }
      OpBuilder b(&op);
      Value input = transfer->input;
      auto pending = PendingType::get(op.getContext(), {input.getType()});
      auto start = TransferStartOp::create(b, op.getLoc(), pending,
                                           transfer->kind, input,
                                           transfer->target);
      order.inserted(start);
      b.setInsertionPoint(firstReader);
      auto wait = TransferWaitOp::create(b, op.getLoc(), start.getHandle());
      order.inserted(wait);
      op.getResult(0).replaceAllUsesWith(wait.getResult());
      transfers.push_back({start, wait});
      order.erased(&op);
      op.erase();
    }
  }

  /// Transfers of step state (NVMe reads of offloaded states and shards,
  /// copies of offloaded arguments) are prefetched as gathers are: the
  /// k-th starts when the (k - depth)-th is waited, or earlier if a gather
  /// it feeds already moved it. A transfer of a computed value starts as
  /// soon as the value exists; copies of computed values to the host are
  /// waited early (limitCopiesToHostInFlight). At most `depth` NVMe writes
  /// are in flight: each is waited, at the latest, when the one `depth`
  /// later starts, so that the host buffers they read are freed. Depth 0
  /// starts each other transfer right before its wait.
  void scheduleTransfers() {
    SmallVector<TransferPair *> fetches, writes, copiesToHost;
    // The transfers started after one op keep their program order (the
    // order their results are needed in: the offload thread runs them in
    // start order).
    DenseMap<Operation *, Operation *> lastStartedAfter;
    for (TransferPair &pair : transfers) {
      Value input = pair.start.getInput();
      if (pair.start.getKind() == TransferKind::NvmeWrite) {
        writes.push_back(&pair);
      } else if (isStepState(input, body)) {
        fetches.push_back(&pair);
      } else if (Operation *def = input.getDefiningOp();
                 def && pair.start.getKind() == TransferKind::ToHost) {
        copiesToHost.push_back(&pair);
        Operation *&after = lastStartedAfter[def];
        order.moveAfter(pair.start, after ? after : def);
        after = pair.start;
      } else if (depth == 0) {
        order.moveBefore(pair.start, pair.wait);
      } else if (Operation *def = input.getDefiningOp()) {
        Operation *&after = lastStartedAfter[def];
        order.moveAfter(pair.start, after ? after : def);
        after = pair.start;
      }
    }
    llvm::sort(fetches, [&](TransferPair *a, TransferPair *b) {
      return order.isBefore(a->wait, b->wait);
    });
    for (auto [i, pair] : llvm::enumerate(fetches)) {
      Operation *start = pair->start;
      if (depth == 0) {
        order.moveBefore(start, pair->wait);
        continue;
      }
      if (static_cast<int64_t>(i) < depth) {
        if (isa<BlockArgument>(pair->start.getInput()))
          moveToFront(start);
        continue;
      }
      Operation *after = fetches[i - depth]->wait;
      if (order.isBefore(after, start)) {
        order.moveAfter(start, after);
        // A compute copy cast on the host, and the read it casts, come
        // along.
        hoistProducers(start);
      }
    }
    limitInFlight<TransferPair>(writes);
    limitCopiesToHostInFlight(copiesToHost);
  }

  /// A copy of a computed value to the host (a reduced gradient for the
  /// host optimizer) frees the value's device buffer at its wait, not at
  /// its start; left before the copy's first reader, the wait would keep
  /// every gradient on the device until the optimizer. The copies started
  /// after one op (a bucket's gradients) are in flight together, and at
  /// most `depth` such groups are: each group is waited, at the latest,
  /// when the group `depth` later starts. Depth 0 waits each copy right
  /// after its start.
  void limitCopiesToHostInFlight(MutableArrayRef<TransferPair *> copies) {
    llvm::sort(copies, [&](TransferPair *a, TransferPair *b) {
      return order.isBefore(a->start, b->start);
    });
    SmallVector<SmallVector<TransferPair *>> groups;
    Operation *groupDef = nullptr;
    for (TransferPair *pair : copies) {
      Operation *def = pair->start.getInput().getDefiningOp();
      if (groups.empty() || def != groupDef)
        groups.emplace_back();
      groupDef = def;
      groups.back().push_back(pair);
    }
    for (auto [i, group] : llvm::enumerate(groups))
      for (TransferPair *pair : group) {
        Operation *wait = pair->wait;
        if (depth == 0) {
          order.moveAfter(wait, pair->start);
          continue;
        }
        if (i + depth >= groups.size())
          continue;
        Operation *next = groups[i + depth].front()->start;
        if (order.isBefore(next, wait))
          order.moveBefore(wait, next);
      }
  }

  Block &body;
  int64_t depth;
  /// Every order query and move goes through it.
  OpOrder order;
  SmallVector<Pair> pairs;
  SmallVector<TransferPair> transfers;
  /// The clipping norm's partial sums, each with the wait of the reduction
  /// whose results it reads.
  SmallVector<std::pair<Operation *, Operation *>> partialNormsAfter;
  /// The last op moved to the start of the step.
  Operation *front = nullptr;
};

struct ScheduleCollectivesPass
    : autoshard::train::impl::ScheduleCollectivesPassBase<
          ScheduleCollectivesPass> {
  using ScheduleCollectivesPassBase::ScheduleCollectivesPassBase;

  void runOnOperation() override {
    if (prefetchDepth < 0) {
      getOperation().emitError()
          << "prefetch depth must be at least 0, got "
          << static_cast<int64_t>(prefetchDepth);
      return signalPassFailure();
    }
    FailureOr<FunctionOpInterface> step = findStepFunction(getOperation());
    if (failed(step))
      return signalPassFailure();
    if (!(*step)->hasAttr(TrainDialect::kPartitionedAttrName))
      return;
    Scheduler(step->getFunctionBody().front(), prefetchDepth).run();
  }
};

} // namespace
