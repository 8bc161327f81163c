//===- TensorCalls.cpp - the asrt_* calls of the generic tensor ops -------===//
//
// The generic ops (TrainTensorOps.td) run on abi.h's generic kernels, which
// take an iteration space and each operand's element strides. The rules
// here compute them from the static shapes: broadcasting is a zero stride,
// a transpose permuted strides, a slice an offset. Dimensions that every
// operand walks contiguously are merged first, so that the kernels' inner
// loops are long and most calls have rank 1 or 2.
//
//===----------------------------------------------------------------------===//

#include "StepEmitter.h"

#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace autoshard;
namespace train = autoshard::train;

static_assert(static_cast<int>(train::UnaryFn::Erf) == ASRT_UNARY_ERF &&
                  static_cast<int>(train::UnaryFn::GeluErf) ==
                      ASRT_UNARY_GELU_ERF &&
                  static_cast<int>(train::UnaryFn::Relu) == ASRT_UNARY_RELU,
              "train::UnaryFn's values are abi.h's asrt_unary_fn");
static_assert(static_cast<int>(train::ComparePredicate::NE) + ASRT_BINARY_LT ==
                  ASRT_BINARY_NE,
              "train::ComparePredicate follows abi.h's comparison codes");

Value StepEmitter::constantAddress(StringRef prefix, Attribute value,
                                   Type type, unsigned alignment) {
  if (placementOnly)
    return placeholder(LLVM::LLVMPointerType::get(builder().getContext()));
  OpBuilder &b = builder();
  // One global per distinct constant: layers of one shape share their dims
  // and strides. Names continue after those already in the module (another
  // entry's lowering may have made some).
  LLVM::GlobalOp &global = constantGlobals[value];
  if (!global) {
    ModuleOp mod = module();
    if (!nextConstant) {
      nextConstant = 0;
      for (auto existing : mod.getOps<LLVM::GlobalOp>()) {
        StringRef name = existing.getSymName();
        unsigned index;
        if (name.starts_with("asrt_") &&
            !name.rsplit('.').second.getAsInteger(10, index))
          *nextConstant = std::max(*nextConstant, index + 1);
      }
    }
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(mod.getBody());
    global = LLVM::GlobalOp::create(
        b, mod.getLoc(), type, /*isConstant=*/true, LLVM::Linkage::Private,
        (prefix + "." + Twine((*nextConstant)++)).str(), value, alignment);
  }
  return LLVM::AddressOfOp::create(b, loc(), global);
}

Value StepEmitter::i64Array(ArrayRef<int64_t> values) {
  if (values.empty())
    return nullPtr();
  Type i64 = builder().getI64Type();
  auto n = static_cast<int64_t>(values.size());
  return constantAddress(
      "asrt_dims",
      DenseIntElementsAttr::get(RankedTensorType::get({n}, i64), values),
      LLVM::LLVMArrayType::get(i64, n));
}

namespace {

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

/// The strides over `out` of a row-major operand of shape `operand` that
/// broadcasts to it (aligned at the right; 0 where it repeats).
SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> operand,
                                      ArrayRef<int64_t> out) {
  SmallVector<int64_t> own = rowMajorStrides(operand);
  SmallVector<int64_t> strides(out.size(), 0);
  size_t lead = out.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i)
    if (operand[i] != 1)
      strides[lead + i] = own[i];
  return strides;
}

/// An iteration space and the strides of each operand over it.
struct Space {
  SmallVector<int64_t> dims;
  SmallVector<SmallVector<int64_t>> strides;

  /// Drops dimensions of size 1 and merges each dimension into the next
  /// where every operand steps across both as across one.
  void coalesce() {
    SmallVector<int64_t> newDims;
    SmallVector<SmallVector<int64_t>> newStrides(strides.size());
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] == 1)
        continue;
      bool merge = !newDims.empty();
      for (size_t o = 0; merge && o < strides.size(); ++o)
        merge = newStrides[o].back() == strides[o][d] * dims[d];
      if (merge) {
        newDims.back() *= dims[d];
        for (size_t o = 0; o < strides.size(); ++o)
          newStrides[o].back() = strides[o][d];
        continue;
      }
      newDims.push_back(dims[d]);
      for (size_t o = 0; o < strides.size(); ++o)
        newStrides[o].push_back(strides[o][d]);
    }
    // An empty tensor keeps its zero-sized dimension.
    if (llvm::is_contained(dims, 0)) {
      newDims.assign({0});
      for (auto &s : newStrides)
        s.assign({0});
    }
    dims = std::move(newDims);
    strides = std::move(newStrides);
  }

  LogicalResult check(Operation *op) const {
    if (dims.size() <= ASRT_MAX_RANK)
      return success();
    return op->emitOpError()
           << "iterates over " << dims.size()
           << " dimensions that cannot be merged; the runtime's generic "
              "kernels take at most "
           << ASRT_MAX_RANK;
  }

  Value rank(StepEmitter &e) const {
    return e.i32(static_cast<int32_t>(dims.size()));
  }
};

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult emitUnary(Operation *op, train::UnaryFn fn, float alpha,
                        StepEmitter &e) {
  Value input = op->getOperand(0);
  Value out = e.output(op->getResult(0));
  e.call(ABI_FUNCTION(asrt_unary),
         {dtypeOf(e, input), e.i32(static_cast<int32_t>(fn)), e.buffer(input),
          out, e.i64(numElements(input)), e.f32(alpha)});
  return success();
}

template <typename OpT>
LogicalResult emitUnaryOp(OpT op, StepEmitter &e) {
  return emitUnary(op, OpT::kFn, op.getAlpha(), e);
}

LogicalResult emitUnaryGrad(train::UnaryGradOp op, StepEmitter &e) {
  Value out = e.output(op.getResult());
  e.call(ABI_FUNCTION(asrt_unary_grad),
         {dtypeOf(e, op.getInput()), e.i32(static_cast<int32_t>(op.getFn())),
          e.buffer(op.getGradOutput()), e.buffer(op.getInput()), out,
          e.i64(numElements(op.getInput())),
          e.f32(op.getAlpha().convertToFloat())});
  return success();
}

LogicalResult emitDropout(train::DropoutOp op, StepEmitter &e) {
  Value out = e.output(op.getResult());
  int64_t rows = tensorType(op.getInput()).getDimSize(0);
  int64_t n = numElements(op.getInput());
  e.call(ABI_FUNCTION(asrt_dropout),
         {dtypeOf(e, op.getInput()), e.buffer(op.getInput()), out, e.i64(n),
          e.i64(std::max<int64_t>(rows ? n / rows : 1, 1)),
          e.i64(op.getRowOffset()), e.i64(op.getRankRows()),
          e.f32(op.getP().convertToFloat()), e.i64(op.getStream())});
  return success();
}

/// asrt_binary's call for `lhs fn rhs` into the op's result.
LogicalResult emitBinary(Operation *op, asrt_binary_fn fn, StepEmitter &e) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value result = op->getResult(0);
  ArrayRef<int64_t> shape = tensorType(result).getShape();
  Space space{SmallVector<int64_t>(shape),
              {rowMajorStrides(shape),
               broadcastStrides(tensorType(lhs).getShape(), shape),
               broadcastStrides(tensorType(rhs).getShape(), shape)}};
  space.coalesce();
  if (failed(space.check(op)))
    return failure();
  Value out = e.output(result);
  e.call(ABI_FUNCTION(asrt_binary),
         {dtypeOf(e, lhs), e.i32(fn), e.buffer(lhs), e.buffer(rhs), out,
          space.rank(e), e.i64Array(space.dims), e.i64Array(space.strides[1]),
          e.i64Array(space.strides[2])});
  return success();
}

LogicalResult emitAdd(train::AddOp op, StepEmitter &e) {
  // Equal shapes: the elementwise kernel, which may write in place.
  if (op.getLhs().getType() == op.getRhs().getType()) {
    Value out = e.output(op.getResult());
    e.call(ABI_FUNCTION(asrt_add),
           {dtypeOf(e, op.getLhs()), e.buffer(op.getLhs()),
            e.buffer(op.getRhs()), out, e.i64(numElements(op.getLhs()))});
    return success();
  }
  return emitBinary(op, ASRT_BINARY_ADD, e);
}

LogicalResult emitCompare(train::CompareOp op, StepEmitter &e) {
  return emitBinary(
      op,
      static_cast<asrt_binary_fn>(ASRT_BINARY_LT +
                                  static_cast<int>(op.getPredicate())),
      e);
}

LogicalResult emitSelect(train::SelectOp op, StepEmitter &e) {
  ArrayRef<int64_t> shape = op.getResult().getType().getShape();
  Space space{SmallVector<int64_t>(shape),
              {rowMajorStrides(shape),
               broadcastStrides(tensorType(op.getCondition()).getShape(), shape),
               broadcastStrides(tensorType(op.getTrueValue()).getShape(), shape),
               broadcastStrides(tensorType(op.getFalseValue()).getShape(),
                                shape)}};
  space.coalesce();
  if (failed(space.check(op)))
    return failure();
  Value out = e.output(op.getResult());
  e.call(ABI_FUNCTION(asrt_select),
         {dtypeOf(e, op.getTrueValue()), e.buffer(op.getCondition()),
          e.buffer(op.getTrueValue()), e.buffer(op.getFalseValue()), out,
          space.rank(e), e.i64Array(space.dims), e.i64Array(space.strides[1]),
          e.i64Array(space.strides[2]), e.i64Array(space.strides[3])});
  return success();
}

LogicalResult emitFull(train::FullOp op, StepEmitter &e) {
  Value out = e.output(op.getResult());
  e.call(ABI_FUNCTION(asrt_fill),
         {dtypeOf(e, op.getResult()), out, e.i64(numElements(op.getResult())),
          e.f32(op.getValue().convertToFloat())});
  return success();
}

/// The elements of a constant as the runtime stores them: little-endian,
/// masks one byte per element.
std::string constantBytes(DenseElementsAttr value) {
  std::string bytes;
  auto append = [&](const APInt &bits) {
    for (unsigned i = 0; i < bits.getBitWidth(); i += 8)
      bytes.push_back(static_cast<char>(bits.extractBitsAsZExtValue(8, i)));
  };
  Type element = value.getElementType();
  if (element.isInteger(1)) {
    for (bool bit : value.getValues<bool>())
      bytes.push_back(bit ? 1 : 0);
  } else if (isa<FloatType>(element)) {
    for (const APFloat &x : value.getValues<APFloat>())
      append(x.bitcastToAPInt());
  } else {
    for (const APInt &x : value.getValues<APInt>())
      append(x);
  }
  return bytes;
}

LogicalResult emitConstant(train::ConstantOp op, StepEmitter &e) {
  auto value = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!value)
    return op.emitOpError() << "holds elements the lowering cannot read; "
                               "give them as a dense<...> attribute";
  Value out = e.output(op.getResult());
  std::string bytes = constantBytes(value);
  if (bytes.empty())
    return success();
  OpBuilder &b = e.builder();
  Value src = e.constantAddress(
      "asrt_const", b.getStringAttr(bytes),
      LLVM::LLVMArrayType::get(b.getI8Type(), bytes.size()), /*alignment=*/64);
  e.call(ABI_FUNCTION(asrt_load_constant),
         {out, src, e.i64(static_cast<int64_t>(bytes.size()))});
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

template <typename OpT>
LogicalResult emitReduce(OpT op, asrt_reduce_op kind, StepEmitter &e) {
  Value input = op.getInput();
  ArrayRef<int64_t> shape = tensorType(input).getShape();
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  ArrayRef<int64_t> reduced = op.getDims();
  Space kept, red;
  kept.strides.resize(1);
  red.strides.resize(1);
  for (auto [i, size] : llvm::enumerate(shape)) {
    Space &space = llvm::is_contained(reduced, static_cast<int64_t>(i)) ? red
                                                                        : kept;
    space.dims.push_back(size);
    space.strides[0].push_back(strides[i]);
  }
  // The kept dimensions are y's, densely: they merge where x's strides
  // allow it, which also keeps y's order.
  kept.strides.push_back(rowMajorStrides(kept.dims));
  kept.coalesce();
  red.coalesce();
  if (failed(kept.check(op)) || failed(red.check(op)))
    return failure();
  Value out = e.output(op.getResult());
  e.call(ABI_FUNCTION(asrt_reduce),
         {dtypeOf(e, input), e.i32(kind), e.buffer(input), out, kept.rank(e),
          e.i64Array(kept.dims), e.i64Array(kept.strides[0]), red.rank(e),
          e.i64Array(red.dims), e.i64Array(red.strides[0])});
  return success();
}

/// Rows and columns of a softmax over the last dimension of `v`.
std::pair<int64_t, int64_t> rowsAndCols(Value v) {
  RankedTensorType type = tensorType(v);
  int64_t cols = type.getShape().back();
  return {cols ? type.getNumElements() / cols : 0, cols};
}

LogicalResult emitSoftmax(Operation *op, bool log, StepEmitter &e) {
  Value input = op->getOperand(0);
  auto [rows, cols] = rowsAndCols(input);
  Value out = e.output(op->getResult(0));
  e.call(ABI_FUNCTION(asrt_softmax),
         {dtypeOf(e, input), e.buffer(input), out, e.i64(rows), e.i64(cols),
          e.i32(log)});
  return success();
}

LogicalResult emitSoftmaxGrad(train::SoftmaxGradOp op, StepEmitter &e) {
  auto [rows, cols] = rowsAndCols(op.getOutput());
  Value out = e.output(op.getResult());
  e.call(ABI_FUNCTION(asrt_softmax_grad),
         {dtypeOf(e, op.getOutput()), e.buffer(op.getGradOutput()),
          e.buffer(op.getOutput()), out, e.i64(rows), e.i64(cols),
          e.i32(op.getLog())});
  return success();
}

//===----------------------------------------------------------------------===//
// Views and data movement
//===----------------------------------------------------------------------===//

/// Copies `input` (read with strides `inStrides` from element `inOffset`)
/// into `out` over `dims`, written with `outStrides` from `outOffset`.
LogicalResult emitCopy(Operation *op, Value input, Value out,
                       ArrayRef<int64_t> dims, ArrayRef<int64_t> inStrides,
                       int64_t inOffset, ArrayRef<int64_t> outStrides,
                       int64_t outOffset, StepEmitter &e) {
  Space space{SmallVector<int64_t>(dims),
              {SmallVector<int64_t>(inStrides),
               SmallVector<int64_t>(outStrides)}};
  space.coalesce();
  if (failed(space.check(op)))
    return failure();
  e.call(ABI_FUNCTION(asrt_copy_strided),
         {dtypeOf(e, input), e.buffer(input), out, space.rank(e),
          e.i64Array(space.dims), e.i64Array(space.strides[0]),
          e.i64(inOffset), e.i64Array(space.strides[1]), e.i64(outOffset)});
  return success();
}

LogicalResult emitTranspose(train::TransposeOp op, StepEmitter &e) {
  ArrayRef<int64_t> shape = op.getResult().getType().getShape();
  SmallVector<int64_t> inStrides =
      rowMajorStrides(op.getInput().getType().getShape());
  SmallVector<int64_t> permuted;
  for (int64_t dim : op.getPermutation())
    permuted.push_back(inStrides[dim]);
  Value out = e.output(op.getResult());
  return emitCopy(op, op.getInput(), out, shape, permuted, 0,
                  rowMajorStrides(shape), 0, e);
}

LogicalResult emitBroadcastTo(train::BroadcastToOp op, StepEmitter &e) {
  ArrayRef<int64_t> shape = op.getResult().getType().getShape();
  Value out = e.output(op.getResult());
  return emitCopy(op, op.getInput(), out, shape,
                  broadcastStrides(op.getInput().getType().getShape(), shape),
                  0, rowMajorStrides(shape), 0, e);
}

LogicalResult emitSlice(train::SliceOp op, StepEmitter &e) {
  RankedTensorType in = op.getInput().getType();
  SmallVector<int64_t> strides = rowMajorStrides(in.getShape());
  int64_t dim = op.getDim();
  int64_t offset = static_cast<int64_t>(op.getStart()) * strides[dim];
  // A range of whole rows (every dimension before `dim` of size 1) is a
  // contiguous block: a view.
  if (llvm::all_of(in.getShape().take_front(dim),
                   [](int64_t size) { return size == 1; })) {
    e.alias(op.getResult(), op.getInput(),
            offset * llvm::divideCeil(in.getElementTypeBitWidth(), 8));
    return success();
  }
  Value out = e.output(op.getResult());
  ArrayRef<int64_t> shape = op.getResult().getType().getShape();
  return emitCopy(op, op.getInput(), out, shape, strides, offset,
                  rowMajorStrides(shape), 0, e);
}

LogicalResult emitPad(train::PadOp op, StepEmitter &e) {
  RankedTensorType result = op.getResult().getType();
  Value out = e.output(op.getResult());
  if (op.getLow() != 0 || op.getHigh() != 0)
    e.call(ABI_FUNCTION(asrt_fill),
           {dtypeOf(e, op.getResult()), out, e.i64(result.getNumElements()),
            e.f32(op.getValue().convertToFloat())});
  SmallVector<int64_t> outStrides = rowMajorStrides(result.getShape());
  ArrayRef<int64_t> inShape = op.getInput().getType().getShape();
  return emitCopy(op, op.getInput(), out, inShape, rowMajorStrides(inShape),
                  0, outStrides,
                  static_cast<int64_t>(op.getLow()) * outStrides[op.getDim()],
                  e);
}

LogicalResult emitConcat(train::ConcatOp op, StepEmitter &e) {
  RankedTensorType result = op.getResult().getType();
  SmallVector<int64_t> outStrides = rowMajorStrides(result.getShape());
  int64_t dim = op.getDim(), start = 0;
  Value out = e.output(op.getResult());
  for (Value input : op.getInputs()) {
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    if (failed(emitCopy(op, input, out, shape, rowMajorStrides(shape), 0,
                        outStrides, start * outStrides[dim], e)))
      return failure();
    start += shape[dim];
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

LogicalResult emitMatmul(train::MatmulOp op, StepEmitter &e) {
  RankedTensorType lhs = op.getLhs().getType(), rhs = op.getRhs().getType(),
                   result = op.getResult().getType();
  ArrayRef<int64_t> shape = result.getShape();
  int64_t m = shape.end()[-2], n = shape.end()[-1];
  int64_t k = lhs.getShape().end()[op.getTransposeLhs() ? -2 : -1];
  ArrayRef<int64_t> batch = shape.drop_back(2);
  // Each operand's batch strides in elements: its row-major strides of the
  // batch dimensions, 0 where it is broadcast.
  auto batchStrides = [&](RankedTensorType type) {
    SmallVector<int64_t> own = rowMajorStrides(type.getShape());
    ArrayRef<int64_t> dims = type.getShape().drop_back(2);
    SmallVector<int64_t> strides(batch.size(), 0);
    size_t lead = batch.size() - dims.size();
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] != 1)
        strides[lead + i] = own[i];
    return strides;
  };
  SmallVector<int64_t> lhsStrides = batchStrides(lhs),
                       rhsStrides = batchStrides(rhs);
  // A batch of activations times one matrix (a layer's weight): the batch
  // stacks into the rows of one product when lhs is stored untransposed.
  if (!op.getTransposeLhs() && llvm::all_of(rhsStrides, [](int64_t stride) {
        return stride == 0;
      })) {
    SmallVector<int64_t> dense = rowMajorStrides(batch);
    for (int64_t &stride : dense)
      stride *= m * k;
    if (lhsStrides == dense) {
      for (int64_t size : batch)
        m *= size;
      batch = {};
      lhsStrides.clear();
      rhsStrides.clear();
    }
  }
  Space space{SmallVector<int64_t>(batch), {lhsStrides, rhsStrides}};
  SmallVector<int64_t> outStrides = rowMajorStrides(batch);
  for (int64_t &stride : outStrides)
    stride *= m * n;
  space.strides.push_back(outStrides);
  space.coalesce();
  if (failed(space.check(op)))
    return failure();
  Value out = e.output(op.getResult());
  e.call(ABI_FUNCTION(asrt_matmul),
         {dtypeOf(e, op.getLhs()), e.buffer(op.getLhs()), e.buffer(op.getRhs()),
          out, space.rank(e), e.i64Array(space.dims),
          e.i64Array(space.strides[0]), e.i64Array(space.strides[1]), e.i64(m),
          e.i64(n), e.i64(k), e.i32(op.getTransposeLhs()),
          e.i32(op.getTransposeRhs())});
  return success();
}

} // namespace

LogicalResult autoshard::emitTensorOpCall(Operation *op, StepEmitter &e) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<train::NegOp, train::ExpOp, train::LogOp, train::TanhOp,
            train::SigmoidOp, train::RsqrtOp, train::SqrtOp, train::SinOp,
            train::CosOp, train::SiluOp, train::GeluErfOp, train::ReciprocalOp,
            train::AbsOp, train::ErfOp, train::PowScalarOp, train::AddScalarOp>(
          [&](auto op) { return emitUnaryOp(op, e); })
      .Case<train::UnaryGradOp>([&](auto op) { return emitUnaryGrad(op, e); })
      .Case<train::DropoutOp>([&](auto op) { return emitDropout(op, e); })
      .Case<train::AddOp>([&](auto op) { return emitAdd(op, e); })
      .Case<train::SubOp>(
          [&](auto op) { return emitBinary(op, ASRT_BINARY_SUB, e); })
      .Case<train::MulOp>(
          [&](auto op) { return emitBinary(op, ASRT_BINARY_MUL, e); })
      .Case<train::DivOp>(
          [&](auto op) { return emitBinary(op, ASRT_BINARY_DIV, e); })
      .Case<train::MaximumOp>(
          [&](auto op) { return emitBinary(op, ASRT_BINARY_MAX, e); })
      .Case<train::MinimumOp>(
          [&](auto op) { return emitBinary(op, ASRT_BINARY_MIN, e); })
      .Case<train::PowOp>(
          [&](auto op) { return emitBinary(op, ASRT_BINARY_POW, e); })
      .Case<train::CompareOp>([&](auto op) { return emitCompare(op, e); })
      .Case<train::SelectOp>([&](auto op) { return emitSelect(op, e); })
      .Case<train::FullOp>([&](auto op) { return emitFull(op, e); })
      .Case<train::ConstantOp>([&](auto op) { return emitConstant(op, e); })
      .Case<train::ReduceSumOp>(
          [&](auto op) { return emitReduce(op, ASRT_REDUCE_SUM, e); })
      .Case<train::ReduceMeanOp>(
          [&](auto op) { return emitReduce(op, ASRT_REDUCE_AVG, e); })
      .Case<train::ReduceMaxOp>(
          [&](auto op) { return emitReduce(op, ASRT_REDUCE_MAX, e); })
      .Case<train::SoftmaxOp>(
          [&](auto op) { return emitSoftmax(op, /*log=*/false, e); })
      .Case<train::LogSoftmaxOp>(
          [&](auto op) { return emitSoftmax(op, /*log=*/true, e); })
      .Case<train::SoftmaxGradOp>(
          [&](auto op) { return emitSoftmaxGrad(op, e); })
      .Case<train::TransposeOp>([&](auto op) { return emitTranspose(op, e); })
      .Case<train::BroadcastToOp>(
          [&](auto op) { return emitBroadcastTo(op, e); })
      .Case<train::SliceOp>([&](auto op) { return emitSlice(op, e); })
      .Case<train::PadOp>([&](auto op) { return emitPad(op, e); })
      .Case<train::ConcatOp>([&](auto op) { return emitConcat(op, e); })
      .Case<train::MatmulOp>([&](auto op) { return emitMatmul(op, e); })
      .Default([](Operation *op) {
        return op->emitOpError() << "has no runtime lowering; the runtime "
                                    "runs train ops and shard.all_reduce";
      });
}
