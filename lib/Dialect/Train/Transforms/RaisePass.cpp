//===- RaisePass.cpp - generic op patterns as the runtime's fused ops -----===//
//
// A front end writes GELU, RMSNorm, rotary embeddings, SwiGLU, attention,
// linear layers and a log_softmax + nll_loss as chains of generic ops, each of
// which runs on its own kernel. Recognising the chains here, before autodiff,
// gives the forward and the backward pass the fused kernels, and leaves the
// decision in IR that a test can read.
//
//===----------------------------------------------------------------------===//

#include "autoshard/Dialect/Train/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <optional>

namespace autoshard::train {
#define GEN_PASS_DEF_RAISEPASS
#include "autoshard/Dialect/Train/Transforms/Passes.h.inc"
} // namespace autoshard::train

using namespace mlir;
using namespace autoshard::train;

namespace {

/// Constants a front end writes with a few digits or rounds to f32 match
/// the exact value within this relative tolerance.
constexpr double kConstantTolerance = 1e-5;

/// How far a rotary table's entries may be from cos / sin of the angles of
/// the recovered theta, by the table's element type (bf16 keeps 8 bits).
constexpr double kTableToleranceF32 = 1e-4;
constexpr double kTableToleranceBF16 = 1e-2;

/// [B, H, T, D] <-> [B, T, H, D]: the layout of the generic attention's heads
/// and that of the fused ops. It is its own inverse.
constexpr int64_t kSwapHeadsSeq[] = {0, 2, 1, 3};

bool near(double value, double expected,
          double tolerance = kConstantTolerance) {
  return std::abs(value - expected) <= tolerance * std::abs(expected);
}

bool near(const APFloat &value, double expected) {
  return near(value.convertToFloat(), expected);
}

RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// The defining op of `v` if it is an `OpTy` whose result nothing else
/// reads: a link inside a chain, which the fused op replaces.
template <typename OpTy>
OpTy intermediate(Value v) {
  auto op = v.getDefiningOp<OpTy>();
  if (!op || !v.hasOneUse())
    return nullptr;
  return op;
}

/// Calls `match(a, b)` with the two operands of a commutative op in both
/// orders; the first order that matches wins.
template <typename Fn>
bool eitherOrder(Value lhs, Value rhs, Fn &&match) {
  return match(lhs, rhs) || match(rhs, lhs);
}

/// Whether `shape` is `tail` with leading dimensions of 1 (a table that
/// broadcasts over the leading dimensions only).
bool isBroadcastTable(ArrayRef<int64_t> shape, ArrayRef<int64_t> tail) {
  if (shape.size() < tail.size())
    return false;
  size_t lead = shape.size() - tail.size();
  return llvm::all_of(shape.take_front(lead),
                      [](int64_t d) { return d == 1; }) &&
         shape.drop_front(lead) == tail;
}

/// A product whose two factors `Chain::match(a, b)` reads, in either
/// order, as a chain of one x -> `Fused` x (of the product's type).
template <typename Chain, typename Fused>
struct RaiseProduct : OpRewritePattern<MulOp> {
  using OpRewritePattern<MulOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    Value x;
    eitherOrder(op.getLhs(), op.getRhs(), [&](Value a, Value b) {
      return static_cast<bool>(x = Chain::match(a, b));
    });
    if (!x || x.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, Chain::kNotMatched);
    rewriter.replaceOpWithNewOp<Fused>(op, x);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// GELU (tanh form)
//===----------------------------------------------------------------------===//

/// mul(scale(x, 0.5), add_scalar(tanh(scale(add(x, scale(pow_scalar(x, 3),
/// 0.044715)), sqrt(2/pi))), 1)) -> train.gelu x.
struct RaiseGelu : RaiseProduct<RaiseGelu, GeluOp> {
  using RaiseProduct::RaiseProduct;
  static constexpr const char *kNotMatched = "not the tanh GELU chain";

  /// The x of `0.5 * x` and `1 + tanh(...)`, or null.
  static Value match(Value halfValue, Value onePlusValue) {
    auto half = intermediate<ScaleOp>(halfValue);
    auto onePlus = intermediate<AddScalarOp>(onePlusValue);
    if (!half || !onePlus || !near(half.getFactor(), 0.5) ||
        !near(onePlus.getValue(), 1.0))
      return nullptr;
    Value x = half.getInput();
    auto tanh = intermediate<TanhOp>(onePlus.getInput());
    if (!tanh)
      return nullptr;
    auto outer = intermediate<ScaleOp>(tanh.getInput());
    if (!outer || !near(outer.getFactor(), std::sqrt(2.0 / M_PI)))
      return nullptr;
    auto inner = intermediate<AddOp>(outer.getInput());
    if (!inner || inner.getType() != x.getType())
      return nullptr;
    bool cubic = eitherOrder(
        inner.getLhs(), inner.getRhs(), [&](Value same, Value term) {
          if (same != x)
            return false;
          auto coefficient = intermediate<ScaleOp>(term);
          if (!coefficient || !near(coefficient.getFactor(), 0.044715))
            return false;
          auto cube = intermediate<PowScalarOp>(coefficient.getInput());
          return cube && cube.getInput() == x &&
                 cube.getExponent().convertToFloat() == 3.0f;
        });
    return cubic ? x : nullptr;
  }

};

//===----------------------------------------------------------------------===//
// GELU (exact, erf form)
//===----------------------------------------------------------------------===//

/// The x of `1 + erf(x / sqrt(2))`, add_scalar(erf(scale(x, 1/sqrt(2))), 1)
/// with every link read once, or null. The importer writes `x / sqrt(2)`
/// and `x * 0.7071067811865476` alike, as a scale by 1/sqrt(2).
Value erfOnePlusInput(Value onePlusValue) {
  auto onePlus = intermediate<AddScalarOp>(onePlusValue);
  if (!onePlus || !near(onePlus.getValue(), 1.0))
    return nullptr;
  auto erf = intermediate<ErfOp>(onePlus.getInput());
  if (!erf)
    return nullptr;
  auto scaled = intermediate<ScaleOp>(erf.getInput());
  if (!scaled || !near(scaled.getFactor(), M_SQRT1_2))
    return nullptr;
  return scaled.getInput();
}

/// Whether `v` is scale(of, 0.5) read once.
ScaleOp halfOf(Value v) {
  auto half = intermediate<ScaleOp>(v);
  return half && near(half.getFactor(), 0.5) ? half : nullptr;
}

/// The exact GELU as a front end spells it, with e = 1 + erf(x / sqrt(2)):
/// mul(scale(x, 0.5), e) (`0.5 * x * e`, torch's own decomposition
/// `x * 0.5 * e`) and mul(x, scale(e, 0.5)) (`x * (0.5 * e)`, x times the
/// normal CDF), either order -> train.gelu_erf x. Not train.gelu: that is
/// the tanh approximation, whose values differ by up to ~1e-3.
struct RaiseGeluErf : RaiseProduct<RaiseGeluErf, GeluErfOp> {
  using RaiseProduct::RaiseProduct;
  static constexpr const char *kNotMatched = "not the exact GELU chain";

  static Value match(Value a, Value b) {
    if (ScaleOp half = halfOf(a)) {
      Value x = erfOnePlusInput(b);
      if (x && x == half.getInput())
        return x;
    }
    if (ScaleOp half = halfOf(b)) {
      Value x = erfOnePlusInput(half.getInput());
      if (x && x == a)
        return x;
    }
    return nullptr;
  }

};

/// The same with the half taken last: scale(mul(x, e), 0.5) (`x * e / 2`,
/// `0.5 * (x * e)`), either order of the product -> train.gelu_erf x.
struct RaiseGeluErfHalvedLast : OpRewritePattern<ScaleOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ScaleOp op,
                                PatternRewriter &rewriter) const override {
    auto product = intermediate<MulOp>(op.getInput());
    if (!product || !near(op.getFactor(), 0.5))
      return rewriter.notifyMatchFailure(op, "not half of a product");
    Value x;
    eitherOrder(product.getLhs(), product.getRhs(), [&](Value a, Value b) {
      Value inner = erfOnePlusInput(b);
      if (!inner || inner != a)
        return false;
      x = a;
      return true;
    });
    if (!x || x.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "not the exact GELU chain");
    rewriter.replaceOpWithNewOp<GeluErfOp>(op, x);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// RMSNorm
//===----------------------------------------------------------------------===//

/// Whether `v` is x^2 computed only to be read once: pow_scalar(x, 2), or
/// mul(x, x) (a front end's `x * x`).
bool isSquareOf(Value v, Value x) {
  if (auto power = intermediate<PowScalarOp>(v))
    return power.getInput() == x &&
           power.getExponent().convertToFloat() == 2.0f;
  if (auto product = intermediate<MulOp>(v))
    return product.getLhs() == x && product.getRhs() == x &&
           product.getType() == x.getType();
  return false;
}

/// mul(w, mul(x, rsqrt(add_scalar(reduce_mean(x^2, [last], keepdim),
/// eps)))), x^2 as pow_scalar(x, 2) or mul(x, x), either order of both
/// products -> train.rms_norm x, w.
struct RaiseRmsNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  struct Match {
    Value input, weight;
    APFloat epsilon = APFloat(0.0f);
  };

  /// x * rsqrt(mean(x^2) + eps) in `normedValue`, scaled by `weight`.
  static std::optional<Match> match(Value weight, Value normedValue) {
    auto normed = intermediate<MulOp>(normedValue);
    if (!normed)
      return std::nullopt;
    std::optional<Match> found;
    eitherOrder(normed.getLhs(), normed.getRhs(), [&](Value x, Value inv) {
      auto type = tensorOf(x);
      if (type != normed.getType() || type.getRank() < 1)
        return false;
      auto rsqrt = intermediate<RsqrtOp>(inv);
      if (!rsqrt)
        return false;
      auto shifted = intermediate<AddScalarOp>(rsqrt.getInput());
      if (!shifted)
        return false;
      APFloat eps = shifted.getValue();
      if (!eps.isFiniteNonZero() || eps.isNegative())
        return false;
      auto mean = intermediate<ReduceMeanOp>(shifted.getInput());
      int64_t last = type.getRank() - 1;
      if (!mean || !mean.getKeepdim() ||
          mean.getDims() != ArrayRef<int64_t>{last})
        return false;
      if (!isSquareOf(mean.getInput(), x))
        return false;
      found = Match{x, weight, eps};
      return true;
    });
    if (!found)
      return std::nullopt;
    // The gain: one value per feature of the last dimension.
    auto input = tensorOf(found->input), gain = tensorOf(weight);
    if (gain.getRank() != 1 || gain.getDimSize(0) != input.getShape().back() ||
        gain.getElementType() != input.getElementType())
      return std::nullopt;
    return found;
  }

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<Match> found;
    eitherOrder(op.getLhs(), op.getRhs(), [&](Value w, Value normed) {
      found = match(w, normed);
      return found.has_value();
    });
    if (!found || found->input.getType() != op.getType())
      return rewriter.notifyMatchFailure(op, "not the RMSNorm chain");
    rewriter.replaceOpWithNewOp<RmsNormOp>(
        op, found->input, found->weight,
        rewriter.getF32FloatAttr(found->epsilon.convertToFloat()));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Rotary embedding (rotate-half)
//===----------------------------------------------------------------------===//

/// The elements of a train.constant as doubles, looking through a cast
/// (a bf16 copy of an f32 table), with the tolerance its element type
/// allows.
struct Table {
  ArrayRef<int64_t> shape;
  SmallVector<double> values;
  double tolerance = kTableToleranceF32;
};

std::optional<Table> readTable(Value v) {
  if (auto cast = v.getDefiningOp<CastOp>())
    v = cast.getInput();
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto elements = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!elements || !isa<FloatType>(elements.getElementType()))
    return std::nullopt;
  Table table;
  table.shape = elements.getType().getShape();
  if (!elements.getElementType().isF32())
    table.tolerance = kTableToleranceBF16;
  for (APFloat x : elements.getValues<APFloat>()) {
    bool losesInfo = false;
    x.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &losesInfo);
    table.values.push_back(x.convertToDouble());
  }
  return table;
}

/// Whether the cos and sin tables [T, D] hold, each half repeated, the
/// rotate-half angles `t * theta^(-2i/D)`, every entry within the tables'
/// tolerance.
bool holdsRopeAngles(const Table &cos, const Table &sin, int64_t positions,
                     int64_t dim, double theta) {
  int64_t half = dim / 2;
  double tolerance = std::max(cos.tolerance, sin.tolerance);
  for (int64_t i = 0; i < half; ++i) {
    double frequency = std::pow(theta, -2.0 * double(i) / double(dim));
    for (int64_t t = 0; t < positions; ++t) {
      double angle = double(t) * frequency;
      for (int64_t j : {i, i + half}) {
        int64_t index = t * dim + j;
        if (std::abs(cos.values[index] - std::cos(angle)) > tolerance ||
            std::abs(sin.values[index] - std::sin(angle)) > tolerance)
          return false;
      }
    }
  }
  return true;
}

/// The theta of the rotary tables cos and sin [T, D], or none if they are
/// not rotate-half tables of any theta.
std::optional<double> ropeTheta(const Table &cos, const Table &sin,
                                int64_t positions, int64_t dim) {
  // The angle of pair 1 at position 1 is theta^(-2/D). With one pair or one
  // position no entry depends on theta: any will do.
  if (dim / 2 <= 1 || positions <= 1)
    return holdsRopeAngles(cos, sin, positions, dim, 10000.0)
               ? std::optional<double>(10000.0)
               : std::nullopt;
  double angle = std::atan2(sin.values[dim + 1], cos.values[dim + 1]);
  if (!(angle > 0.0))
    return std::nullopt;
  double theta = std::pow(angle, -double(dim) / 2.0);
  // A front end's theta is a round number (10000, 500000): prefer it when
  // the tables hold its angles too.
  SmallVector<double, 2> candidates;
  double rounded = std::round(theta);
  if (rounded > 0 && near(theta, rounded, 1e-3))
    candidates.push_back(rounded);
  candidates.push_back(theta);
  for (double candidate : candidates)
    if (std::isfinite(static_cast<float>(candidate)) && candidate > 0 &&
        holdsRopeAngles(cos, sin, positions, dim, candidate))
      return candidate;
  return std::nullopt;
}

/// add(mul(x, cos), mul(concat(neg(slice(x, D/2..D)), slice(x, 0..D/2)),
/// sin)) on x [B, H, T, D] with rotary tables cos, sin [T, D]
/// -> transpose(train.rope(transpose(x))), the fused op working on
/// [B, T, H, D].
struct RaiseRope : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  /// x of `rotate_half(x)`, the concat in `rotatedValue`, or null.
  static Value rotatedInput(Value rotatedValue) {
    auto concat = intermediate<ConcatOp>(rotatedValue);
    if (!concat || concat.getInputs().size() != 2)
      return nullptr;
    auto negated = intermediate<NegOp>(concat.getInputs()[0]);
    if (!negated)
      return nullptr;
    auto hi = intermediate<SliceOp>(negated.getInput());
    auto lo = intermediate<SliceOp>(concat.getInputs()[1]);
    if (!hi || !lo || hi.getInput() != lo.getInput())
      return nullptr;
    Value x = hi.getInput();
    auto type = tensorOf(x);
    int64_t last = type.getRank() - 1, dim = type.getShape().back();
    if (dim % 2 != 0 || static_cast<int64_t>(concat.getDim()) != last ||
        static_cast<int64_t>(hi.getDim()) != last ||
        static_cast<int64_t>(lo.getDim()) != last)
      return nullptr;
    int64_t half = dim / 2;
    if (static_cast<int64_t>(hi.getStart()) != half ||
        static_cast<int64_t>(hi.getEnd()) != dim || lo.getStart() != 0 ||
        static_cast<int64_t>(lo.getEnd()) != half)
      return nullptr;
    return x;
  }

  struct Match {
    Value input;
    Value cos, sin;
  };

  static std::optional<Match> match(Value straightValue, Value rotatedValue) {
    auto straight = intermediate<MulOp>(straightValue);
    auto rotated = intermediate<MulOp>(rotatedValue);
    if (!straight || !rotated)
      return std::nullopt;
    Match found;
    if (!eitherOrder(rotated.getLhs(), rotated.getRhs(),
                     [&](Value r, Value sin) {
                       found.input = rotatedInput(r);
                       found.sin = sin;
                       return static_cast<bool>(found.input);
                     }))
      return std::nullopt;
    if (!eitherOrder(straight.getLhs(), straight.getRhs(),
                     [&](Value x, Value cos) {
                       found.cos = cos;
                       return x == found.input;
                     }))
      return std::nullopt;
    return found;
  }

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    std::optional<Match> found;
    eitherOrder(op.getLhs(), op.getRhs(), [&](Value straight, Value rotated) {
      found = match(straight, rotated);
      return found.has_value();
    });
    if (!found)
      return rewriter.notifyMatchFailure(op, "not the rotate-half chain");
    auto type = tensorOf(found->input);
    if (type.getRank() != 4 || type != op.getType())
      return rewriter.notifyMatchFailure(op, "rotates no [B, H, T, D] tensor");
    int64_t positions = type.getDimSize(2), dim = type.getDimSize(3);
    std::optional<Table> cos = readTable(found->cos);
    std::optional<Table> sin = readTable(found->sin);
    if (!cos || !sin || !isBroadcastTable(cos->shape, {positions, dim}) ||
        !isBroadcastTable(sin->shape, {positions, dim}))
      return rewriter.notifyMatchFailure(op, "cos and sin are no [T, D] "
                                             "constants");
    std::optional<double> theta = ropeTheta(*cos, *sin, positions, dim);
    if (!theta)
      return rewriter.notifyMatchFailure(op, "the tables are not rotary "
                                             "cos and sin of any theta");
    Location loc = op.getLoc();
    Value bthd =
        TransposeOp::create(rewriter, loc, found->input, kSwapHeadsSeq);
    Value rotatedBthd =
        RopeOp::create(rewriter, loc, bthd,
                       rewriter.getF32FloatAttr(static_cast<float>(*theta)));
    rewriter.replaceOpWithNewOp<TransposeOp>(op, rotatedBthd, kSwapHeadsSeq);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// SwiGLU
//===----------------------------------------------------------------------===//

/// mul(silu(gate), up), either order -> train.swiglu gate, up.
struct RaiseSwiglu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    Value gate, up;
    eitherOrder(op.getLhs(), op.getRhs(), [&](Value activated, Value other) {
      auto silu = intermediate<SiluOp>(activated);
      if (!silu || silu.getType() != other.getType() ||
          other.getType() != op.getType())
        return false;
      gate = silu.getInput();
      up = other;
      return true;
    });
    if (!gate)
      return rewriter.notifyMatchFailure(op, "not silu(gate) * up");
    rewriter.replaceOpWithNewOp<SwigluOp>(op, gate, up);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Causal scaled-dot-product attention
//===----------------------------------------------------------------------===//

/// Whether `v` is a constant mask [T, T] (leading 1s allowed) that lets
/// position i see exactly the positions j <= i: true where i sees j, or,
/// with `hides`, true where it does not (the mask of a masked_fill,
/// `~tril`, `tril == 0`).
bool isCausalMask(Value v, int64_t positions, bool hides) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto elements = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!elements || !elements.getElementType().isInteger(1) ||
      !isBroadcastTable(elements.getType().getShape(), {positions, positions}))
    return false;
  int64_t index = 0;
  for (bool marked : elements.getValues<bool>()) {
    int64_t i = index / positions, j = index % positions;
    if ((marked != hides) != (j <= i))
      return false;
    ++index;
  }
  return true;
}

/// Whether `v` is a fill that softmax turns into a weight of exactly 0:
/// -inf, or the lowest float a front end writes instead.
bool isMaskedFill(Value v) {
  auto full = v.getDefiningOp<FullOp>();
  if (!full)
    return false;
  APFloat value = full.getValue();
  return value.isNegative() &&
         (value.isInfinity() || value.convertToFloat() <= -1e30f);
}

/// The scores a select masks for softmax, and the mask: select(mask,
/// scores, fill) with the mask true where a position is seen, or
/// masked_fill's select(mask, fill, scores) with it true where one is
/// hidden.
struct MaskedScores {
  Value scores, mask;
  bool hides = false;
};

std::optional<MaskedScores> maskedScores(SelectOp select) {
  MaskedScores found{nullptr, select.getCondition()};
  if (isMaskedFill(select.getFalseValue())) {
    found.scores = select.getTrueValue();
  } else if (isMaskedFill(select.getTrueValue())) {
    found.scores = select.getFalseValue();
    found.hides = true;
  } else {
    return std::nullopt;
  }
  if (found.scores.getType() != select.getType())
    return std::nullopt;
  return found;
}

/// The [B, KV, T, D] tensor that `v` [B, H, T, D] repeats per group of
/// H / KV query heads (Llama's repeat_kv: reshape to [B, KV, 1, T, D],
/// broadcast_to [B, KV, rep, T, D], reshape to [B, H, T, D]), or `v` itself
/// when it is not such a repetition.
Value unrepeated(Value v) {
  auto merged = intermediate<ReshapeOp>(v);
  if (!merged)
    return v;
  auto expanded = intermediate<BroadcastToOp>(merged.getInput());
  if (!expanded)
    return v;
  auto split = intermediate<ReshapeOp>(expanded.getInput());
  if (!split)
    return v;
  Value source = split.getInput();
  ArrayRef<int64_t> heads = tensorOf(v).getShape();
  ArrayRef<int64_t> kv = tensorOf(source).getShape();
  ArrayRef<int64_t> one = tensorOf(split.getResult()).getShape();
  ArrayRef<int64_t> rep = tensorOf(expanded.getResult()).getShape();
  if (heads.size() != 4 || kv.size() != 4 || kv[0] != heads[0] ||
      kv[2] != heads[2] || kv[3] != heads[3] || kv[1] < 1 ||
      heads[1] % kv[1] != 0)
    return v;
  int64_t r = heads[1] / kv[1];
  SmallVector<int64_t> oneShape{kv[0], kv[1], 1, kv[2], kv[3]};
  SmallVector<int64_t> repShape{kv[0], kv[1], r, kv[2], kv[3]};
  if (one != ArrayRef<int64_t>(oneShape) || rep != ArrayRef<int64_t>(repShape))
    return v;
  return source;
}

/// The keys [B, H, T, D] of scores q . k^T: the product's rhs when it reads
/// it transposed (transpose_rhs), or what an explicit transpose of the last
/// two dimensions reads (`q @ k.transpose(-2, -1)`). Such a transpose may
/// already be composed with the heads' own (transpose(k0, [0, 2, 3, 1]) for
/// k0 [B, T, H, D]): the keys are then transpose(k0, [0, 2, 1, 3]), to be
/// made once the match is certain, so `permutation` holds it (empty: the
/// keys are `source` itself).
struct Keys {
  Value source;
  SmallVector<int64_t> permutation;
};

std::optional<Keys> keysOf(MatmulOp product) {
  if (product.getTransposeLhs())
    return std::nullopt;
  if (product.getTransposeRhs())
    return Keys{product.getRhs(), {}};
  auto explicitT = intermediate<TransposeOp>(product.getRhs());
  if (!explicitT || explicitT.getPermutation().size() != 4)
    return std::nullopt;
  SmallVector<int64_t> perm(explicitT.getPermutation());
  std::swap(perm[2], perm[3]);
  bool identity = true;
  for (auto [i, dim] : llvm::enumerate(perm))
    identity &= dim == static_cast<int64_t>(i);
  if (identity)
    perm.clear();
  return Keys{explicitT.getInput(), perm};
}

/// matmul(softmax(select(causal mask, scale(matmul(q, k, transpose_rhs), s),
/// -inf)), v) on [B, H, T, D] heads (k and v possibly repeated from KV
/// heads) -> transpose(train.causal_attention(transpose(q), transpose(k),
/// transpose(v))), the fused op working on [B, T, H, D] and reading the
/// KV heads themselves. Also masked_fill's spelling select(~causal mask,
/// -inf, scores), and the scale 1/sqrt(D) on q before the product
/// (matmul(scale(q, 1/sqrt(D)), k, transpose_rhs)), and k transposed
/// explicitly (matmul(q, transpose(k))).
struct RaiseCausalAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getTransposeLhs() || op.getTransposeRhs())
      return rewriter.notifyMatchFailure(op, "not probabilities . values");
    auto softmax = intermediate<SoftmaxOp>(op.getLhs());
    if (!softmax)
      return rewriter.notifyMatchFailure(op, "not softmax . values");
    auto select = intermediate<SelectOp>(softmax.getInput());
    std::optional<MaskedScores> masked;
    if (select)
      masked = maskedScores(select);
    if (!masked)
      return rewriter.notifyMatchFailure(op, "no masked scores");
    // The scale on the scores is optional: 1 when the front end folded it
    // into q (see below).
    Value scores = masked->scores;
    double scale = 1.0;
    if (auto scaled = intermediate<ScaleOp>(scores)) {
      scale = scaled.getFactor().convertToFloat();
      scores = scaled.getInput();
    }
    auto product = intermediate<MatmulOp>(scores);
    std::optional<Keys> keys;
    if (product)
      keys = keysOf(product);
    if (!keys)
      return rewriter.notifyMatchFailure(op, "scores are not q . k^T");
    Value q = product.getLhs();
    auto qType = tensorOf(q);
    auto kType = tensorOf(keys->source);
    if (!keys->permutation.empty()) {
      SmallVector<int64_t> shape;
      for (int64_t dim : keys->permutation)
        shape.push_back(kType.getDimSize(dim));
      kType = kType.clone(shape);
    }
    auto vType = tensorOf(op.getRhs());
    if (qType.getRank() != 4 || kType != qType || vType != qType ||
        op.getType() != qType)
      return rewriter.notifyMatchFailure(op, "q, k, v are not one "
                                             "[B, H, T, D] type");
    int64_t positions = qType.getDimSize(2), dim = qType.getDimSize(3);
    if (!isCausalMask(masked->mask, positions, masked->hides))
      return rewriter.notifyMatchFailure(op, "the mask is not causal");
    // q scaled by 1/sqrt(D) before the product (q * D^-0.5, then q . k^T)
    // is the same scale on the scores. Another factor on q stays q's: the
    // fused op reads the scaled q.
    if (auto scaled = intermediate<ScaleOp>(q)) {
      double factor = scaled.getFactor().convertToFloat();
      if (near(factor, 1.0 / std::sqrt(double(dim)))) {
        scale *= factor;
        q = scaled.getInput();
      }
    }

    Location loc = op.getLoc();
    Value keysHeads = keys->source;
    if (!keys->permutation.empty())
      keysHeads =
          TransposeOp::create(rewriter, loc, keys->source, keys->permutation)
              .getResult();
    Value k = unrepeated(keysHeads);
    Value v = unrepeated(op.getRhs());
    // The fused op reads one number of KV heads for keys and values.
    if (k.getType() != v.getType()) {
      k = keysHeads;
      v = op.getRhs();
    }
    auto swap = [&](Value x) {
      return TransposeOp::create(rewriter, loc, x, kSwapHeadsSeq).getResult();
    };
    FloatAttr scaleAttr;
    if (!near(scale, 1.0 / std::sqrt(double(dim)), 1e-6))
      scaleAttr = rewriter.getF32FloatAttr(static_cast<float>(scale));
    auto attention = CausalAttentionOp::create(rewriter, loc, swap(q), swap(k),
                                               swap(v), scaleAttr);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, attention.getResult(),
                                             kSwapHeadsSeq);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

/// Whether `value` is a weight: a step argument, or its compute-precision
/// cast.
bool isWeight(Value value) {
  if (auto cast = value.getDefiningOp<CastOp>())
    value = cast.getInput();
  return isa<BlockArgument>(value);
}

/// The [out, in] weight of a product x . w^T, or of x . w by a weight
/// stored [in, out] (HuggingFace's Conv1D), transposed; null for another
/// product.
Value linearWeight(PatternRewriter &rewriter, MatmulOp matmul) {
  Value rhs = matmul.getRhs();
  if (matmul.getTransposeLhs() || tensorOf(rhs).getRank() != 2)
    return {};
  if (matmul.getTransposeRhs())
    return rhs;
  if (!isWeight(rhs))
    return {};
  return TransposeOp::create(rewriter, matmul.getLoc(), rhs,
                             ArrayRef<int64_t>{1, 0});
}

/// matmul(x, w, transpose_rhs) with w [out, in] -> train.linear x, w; a
/// Conv1D's matmul(x, w) by a weight [in, out] -> train.linear x,
/// transpose(w) (a copy of the weight per step, for the fused kernels).
struct RaiseLinear : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatmulOp op,
                                PatternRewriter &rewriter) const override {
    // Only once it is known not to be a biased layer's product (that is
    // RaiseLinearBias's, which has the higher benefit).
    Value weight = linearWeight(rewriter, op);
    if (!weight)
      return rewriter.notifyMatchFailure(op, "not x . w^T with w [out, in]");
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getLhs(), weight, Value());
    return success();
  }
};

/// add(linear(x, w), b) with b [out] -> train.linear x, w, b (the product
/// either already raised, or still x . w^T).
struct RaiseLinearBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    Value input, weight, bias;
    bool conv1d = false;
    eitherOrder(op.getLhs(), op.getRhs(), [&](Value product, Value b) {
      conv1d = false;
      if (auto linear = intermediate<LinearOp>(product);
          linear && !linear.getBias()) {
        input = linear.getInput();
        weight = linear.getWeight();
      } else if (auto matmul = intermediate<MatmulOp>(product);
                 matmul && !matmul.getTransposeLhs() &&
                 tensorOf(matmul.getRhs()).getRank() == 2 &&
                 (matmul.getTransposeRhs() || isWeight(matmul.getRhs()))) {
        input = matmul.getLhs();
        weight = matmul.getRhs();
        conv1d = !matmul.getTransposeRhs();
      } else {
        return false;
      }
      auto biasType = tensorOf(b);
      int64_t out = tensorOf(weight).getDimSize(conv1d ? 1 : 0);
      if (product.getType() != op.getType() || biasType.getRank() != 1 ||
          biasType.getDimSize(0) != out ||
          biasType.getElementType() != tensorOf(weight).getElementType())
        return false;
      bias = b;
      return true;
    });
    if (!bias)
      return rewriter.notifyMatchFailure(op, "not x . w^T + b");
    if (conv1d)
      weight = TransposeOp::create(rewriter, op.getLoc(), weight,
                                   ArrayRef<int64_t>{1, 0});
    rewriter.replaceOpWithNewOp<LinearOp>(op, input, weight, bias);
    return success();
  }
};

/// reshape(linear(reshape(x))) where the inner reshape only merges the
/// leading dimensions of x [..., in] into one and the outer one splits them
/// back -> train.linear x (PyTorch's Conv1D and nn.Linear on a view(-1, in)
/// of the activations, which torch.export records as such). The linear
/// then meets its neighbours (a GELU, the next layer) directly, so that
/// autoshard-fuse sees the pairs it fuses.
struct RaiseFlattenedLinear : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto linear = intermediate<LinearOp>(op.getInput());
    if (!linear)
      return rewriter.notifyMatchFailure(op, "not a linear layer's result");
    auto flatten = linear.getInput().getDefiningOp<ReshapeOp>();
    if (!flatten)
      return rewriter.notifyMatchFailure(op, "the input is not a view");
    Value x = flatten.getInput();
    ArrayRef<int64_t> xShape = tensorOf(x).getShape();
    ArrayRef<int64_t> flatShape = tensorOf(flatten.getResult()).getShape();
    ArrayRef<int64_t> outShape = op.getType().getShape();
    ArrayRef<int64_t> yShape = linear.getType().getShape();
    // x [d0, ..., dk, in] -> [d0 * ... * dk, in]; y [n, out] -> [d0, ...,
    // dk, out].
    if (xShape.size() < 2 || flatShape.size() != 2 || yShape.size() != 2 ||
        flatShape.back() != xShape.back() ||
        outShape.size() != xShape.size() ||
        outShape.drop_back() != xShape.drop_back() ||
        outShape.back() != yShape.back())
      return rewriter.notifyMatchFailure(op, "not a view of the rows only");
    rewriter.replaceOpWithNewOp<LinearOp>(op, op.getType(), x,
                                          linear.getWeight(),
                                          linear.getBias());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Learned position embeddings
//===----------------------------------------------------------------------===//

/// Whether `v` is a constant of the position ids 0, 1, ..., T-1, as [T] or
/// [1, T] (torch's arange(T).unsqueeze(0)).
bool isPositionIds(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto elements = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!elements || !elements.getElementType().isInteger(32) ||
      elements.getType().getRank() < 1 ||
      !llvm::all_of(elements.getType().getShape().drop_back(),
                    [](int64_t d) { return d == 1; }))
    return false;
  int64_t expected = 0;
  for (const APInt &id : elements.getValues<APInt>())
    if (id.getSExtValue() != expected++)
      return false;
  return true;
}

/// add(x, embedding(arange(T), wpe)) on x [B, T, C], either order, the
/// lookup [T, C] or [1, T, C] -> train.add_position_embedding x, wpe
/// (GPT-2's wpe(arange(T))).
struct RaisePositionEmbedding : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    Value input, table;
    eitherOrder(op.getLhs(), op.getRhs(), [&](Value x, Value positions) {
      auto lookup = intermediate<EmbeddingOp>(positions);
      auto type = tensorOf(x);
      ArrayRef<int64_t> rows = tensorOf(positions).getShape();
      if (rows.size() == 3 && rows.front() == 1)
        rows = rows.drop_front();
      if (!lookup || !isPositionIds(lookup.getIds()) || type.getRank() != 3 ||
          type != op.getType() || rows != type.getShape().drop_front() ||
          tensorOf(lookup.getTable()).getDimSize(0) < type.getDimSize(1))
        return false;
      input = x;
      table = lookup.getTable();
      return true;
    });
    if (!input)
      return rewriter.notifyMatchFailure(op, "not x + wpe(arange(T))");
    rewriter.replaceOpWithNewOp<AddPositionEmbeddingOp>(op, input, table);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Softmax cross-entropy
//===----------------------------------------------------------------------===//

/// nll_loss(log_softmax(x), labels) -> train.softmax_cross_entropy x, labels
/// (torch's F.nll_loss(F.log_softmax(x, -1), t), what cross_entropy is), with
/// the same ignore index, when nothing else reads the log-probabilities: the
/// fused loss never stores them, and its gradient is one kernel instead of
/// nll_loss_grad and softmax_grad. train.log_softmax works on the last
/// dimension, the classes of nll_loss; one over another dimension reaches
/// the loss through a transpose and does not match.
struct RaiseSoftmaxCrossEntropy : OpRewritePattern<NllLossOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(NllLossOp op,
                                PatternRewriter &rewriter) const override {
    auto logSoftmax = intermediate<LogSoftmaxOp>(op.getInput());
    if (!logSoftmax)
      return rewriter.notifyMatchFailure(
          op, "input is not a log_softmax that only the loss reads");
    rewriter.replaceOpWithNewOp<SoftmaxCrossEntropyOp>(
        op, logSoftmax.getInput(), op.getLabels(), op.getIgnoreIndexAttr());
    return success();
  }
};

struct RaisePass : autoshard::train::impl::RaisePassBase<RaisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    // The chains first: a linear layer inside one (none is, today) must
    // not break its match. Benefits order the patterns on one root.
    patterns.add<RaiseCausalAttention, RaiseLinearBias>(&getContext(),
                                                        /*benefit=*/2);
    patterns.add<RaiseGelu, RaiseGeluErf, RaiseGeluErfHalvedLast, RaiseRmsNorm,
                 RaiseRope, RaiseSwiglu, RaiseLinear, RaiseFlattenedLinear,
                 RaisePositionEmbedding, RaiseSoftmaxCrossEntropy>(
        &getContext());
    // The transposes around raised attention and rotary embeddings cancel
    // with those of the heads' layout through train.transpose's folder,
    // which the driver applies as it goes.
    // A step is one block: nothing for region simplification to do, and
    // nothing it should touch.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config))) {
      getOperation().emitError()
          << "autoshard-raise did not reach a fixed point: a pattern keeps "
             "rewriting its own result";
      return signalPassFailure();
    }
  }
};

} // namespace
