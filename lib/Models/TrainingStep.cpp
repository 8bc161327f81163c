//===- TrainingStep.cpp - forward pass and loss of GPT-2 and Llama as IR --===//

#include "autoshard/Dialect/Train/IR/StepSignature.h"
#include "autoshard/Dialect/Train/IR/TrainDialect.h"
#include "autoshard/Models/ModelConfig.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace autoshard::models;
namespace train = autoshard::train;

namespace {

/// Builds `@train_step` for one config in two phases: the parameters are
/// declared first (declaration order is argument order, as in the Hugging
/// Face state dict), then the forward pass looks them up by name. Keeping
/// the name next to its shape and init in one place, and reading it back by
/// name, lets each family's forward pass read like its reference model.
class StepBuilder {
public:
  StepBuilder(MLIRContext *context, const ModelConfig &config)
      : ctx(context), config(config), b(context),
        computeType(config.precision == Precision::BF16
                        ? Type(b.getBF16Type())
                        : Type(b.getF32Type())) {}

  OwningOpRef<ModuleOp> build();

private:
  struct Parameter {
    std::string name;
    SmallVector<int64_t, 2> shape;
    train::InitAttr init;
    /// The module path of its transformer block (`train.unit`); empty for
    /// the embeddings, the final norm and the output projection.
    std::string unit;
  };

  // Declaration. Parameters declared while `unit` is set belong to it.
  void declare(const Twine &name, ArrayRef<int64_t> shape,
               train::InitAttr init);
  void declareGpt2();
  void declareLlama();
  train::InitAttr normal(double std) const;
  train::InitAttr zeros() const;
  train::InitAttr ones() const;

  // Forward pass.
  Value param(const Twine &name) const;
  Location nameLoc(const Twine &name) {
    return NameLoc::get(b.getStringAttr(name));
  }
  /// A linear layer on the parameters `weight` and, unless empty, `bias`.
  Value linear(Location loc, Value input, const Twine &weight,
               const Twine &bias = Twine());
  /// [B, T, heads * D] -> [B, T, heads, D] and back: the attention op works
  /// on separate heads, the projections on the flattened channels.
  Value splitHeads(Location loc, Value input, int64_t heads);
  Value mergeHeads(Location loc, Value input);
  Value forwardGpt2(Value inputIds);
  Value forwardLlama(Value inputIds);

  // The generic forward pass (config.generic), op for op what PyTorch's
  // modules compute.
  RankedTensorType computeTensor(ArrayRef<int64_t> shape) const {
    return RankedTensorType::get(shape, computeType);
  }
  /// nn.Linear: input . weight^T (+ bias).
  Value genericLinear(Location loc, Value input, const Twine &weight,
                      const Twine &bias = Twine());
  /// [B, T, heads * D] -> [B, heads, T, D] and back.
  Value toHeads(Location loc, Value input, int64_t heads);
  Value fromHeads(Location loc, Value input);
  /// Causal softmax attention on [B, H, T, D] queries and [B, KV, T, D]
  /// keys and values (repeated to H heads, as Llama's repeat_kv).
  Value genericAttention(Location loc, Value q, Value k, Value v);
  /// GPT-2's NewGELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  Value genericGelu(Location loc, Value x);
  /// Llama's RMSNorm: weight * (x * rsqrt(mean(x^2) + eps)).
  Value genericRmsNorm(Location loc, Value x, const Twine &weight);
  /// Llama's rotary embedding (rotate-half) on [B, H, T, D].
  Value genericRope(Location loc, Value x);
  Value genericForwardGpt2(Value inputIds);
  Value genericForwardLlama(Value inputIds);
  Value scalarConstant(Location loc, float value) {
    return train::FullOp::create(b, loc, computeTensor({}), APFloat(value));
  }
  Value outputLogits(Value hidden, StringRef embeddingName);
  Attribute optimizerAttr() const;

  MLIRContext *ctx;
  const ModelConfig &config;
  OpBuilder b;
  Type computeType;
  SmallVector<Parameter> parameters;
  std::string unit;
  /// Each parameter as the forward pass reads it: the argument, or its bf16
  /// cast under mixed precision.
  llvm::StringMap<Value> values;
};

train::InitAttr StepBuilder::normal(double std) const {
  return train::InitAttr::get(ctx, train::InitKind::Normal, APFloat(std));
}
train::InitAttr StepBuilder::zeros() const {
  return train::InitAttr::get(ctx, train::InitKind::Zeros, APFloat(0.0));
}
train::InitAttr StepBuilder::ones() const {
  return train::InitAttr::get(ctx, train::InitKind::Ones, APFloat(0.0));
}

void StepBuilder::declare(const Twine &name, ArrayRef<int64_t> shape,
                          train::InitAttr init) {
  parameters.push_back(
      {name.str(), SmallVector<int64_t, 2>(shape), init, unit});
}

void StepBuilder::declareGpt2() {
  int64_t c = config.hidden, f = config.ffn;
  const double std = 0.02;
  // GPT-2 scales the init of the projections that write into the residual
  // stream by 1/sqrt(2 * layers): each block adds two of them.
  const double residualStd = std / std::sqrt(2.0 * double(config.layers));
  declare("wte", {config.vocab, c}, normal(std));
  declare("wpe", {config.maxPositions, c}, normal(std));
  for (int64_t i = 0; i < config.layers; ++i) {
    unit = "h." + std::to_string(i);
    std::string h = unit + ".";
    declare(h + "ln_1.weight", {c}, ones());
    declare(h + "ln_1.bias", {c}, zeros());
    for (StringRef proj : {"q_proj", "k_proj", "v_proj"}) {
      declare(h + "attn." + proj + ".weight", {c, c}, normal(std));
      declare(h + "attn." + proj + ".bias", {c}, zeros());
    }
    declare(h + "attn.c_proj.weight", {c, c}, normal(residualStd));
    declare(h + "attn.c_proj.bias", {c}, zeros());
    declare(h + "ln_2.weight", {c}, ones());
    declare(h + "ln_2.bias", {c}, zeros());
    declare(h + "mlp.c_fc.weight", {f, c}, normal(std));
    declare(h + "mlp.c_fc.bias", {f}, zeros());
    declare(h + "mlp.c_proj.weight", {c, f}, normal(residualStd));
    declare(h + "mlp.c_proj.bias", {c}, zeros());
  }
  unit.clear();
  declare("ln_f.weight", {c}, ones());
  declare("ln_f.bias", {c}, zeros());
  if (!config.tieEmbeddings)
    declare("lm_head.weight", {config.vocab, c}, normal(std));
}

void StepBuilder::declareLlama() {
  int64_t c = config.hidden, f = config.ffn, d = config.headDim();
  int64_t q = config.heads * d, kv = config.kvHeads * d;
  const double std = 0.02;
  declare("model.embed_tokens.weight", {config.vocab, c}, normal(std));
  for (int64_t i = 0; i < config.layers; ++i) {
    unit = "model.layers." + std::to_string(i);
    std::string l = unit + ".";
    declare(l + "input_layernorm.weight", {c}, ones());
    declare(l + "self_attn.q_proj.weight", {q, c}, normal(std));
    declare(l + "self_attn.k_proj.weight", {kv, c}, normal(std));
    declare(l + "self_attn.v_proj.weight", {kv, c}, normal(std));
    declare(l + "self_attn.o_proj.weight", {c, q}, normal(std));
    declare(l + "post_attention_layernorm.weight", {c}, ones());
    declare(l + "mlp.gate_proj.weight", {f, c}, normal(std));
    declare(l + "mlp.up_proj.weight", {f, c}, normal(std));
    declare(l + "mlp.down_proj.weight", {c, f}, normal(std));
  }
  unit.clear();
  declare("model.norm.weight", {c}, ones());
  if (!config.tieEmbeddings)
    declare("lm_head.weight", {config.vocab, c}, normal(std));
}

Value StepBuilder::param(const Twine &name) const {
  auto it = values.find(name.str());
  assert(it != values.end() && "forward pass reads an undeclared parameter");
  return it->second;
}

Value StepBuilder::linear(Location loc, Value input, const Twine &weight,
                          const Twine &bias) {
  return train::LinearOp::create(b, loc, input, param(weight),
                                 bias.isTriviallyEmpty() ? Value()
                                                         : param(bias));
}

Value StepBuilder::splitHeads(Location loc, Value input, int64_t heads) {
  auto type = RankedTensorType::get(
      {config.batchRows(), config.seq, heads, config.headDim()}, computeType);
  return train::ReshapeOp::create(b, loc, type, input);
}

Value StepBuilder::mergeHeads(Location loc, Value input) {
  auto shape = cast<RankedTensorType>(input.getType()).getShape();
  auto type = RankedTensorType::get({shape[0], shape[1], shape[2] * shape[3]},
                                    computeType);
  return train::ReshapeOp::create(b, loc, type, input);
}

Value StepBuilder::outputLogits(Value hidden, StringRef embeddingName) {
  StringRef weight = config.tieEmbeddings ? embeddingName : "lm_head.weight";
  return linear(nameLoc("lm_head"), hidden, weight);
}

Value StepBuilder::forwardGpt2(Value inputIds) {
  FloatAttr eps = b.getF32FloatAttr(config.normEps);
  Location embedLoc = nameLoc("embedding");
  Value x = train::EmbeddingOp::create(b, embedLoc, inputIds, param("wte"));
  x = train::AddPositionEmbeddingOp::create(b, embedLoc, x, param("wpe"));
  for (int64_t i = 0; i < config.layers; ++i) {
    std::string h = "h." + std::to_string(i) + ".";
    Location attnLoc = nameLoc(h + "attn");
    Value n = train::LayerNormOp::create(
        b, attnLoc, x, param(h + "ln_1.weight"), param(h + "ln_1.bias"), eps);
    auto project = [&](StringRef proj) {
      std::string prefix = h + "attn." + proj.str();
      return splitHeads(
          attnLoc, linear(attnLoc, n, prefix + ".weight", prefix + ".bias"),
          config.heads);
    };
    Value q = project("q_proj"), k = project("k_proj"), v = project("v_proj");
    auto attention = train::CausalAttentionOp::create(b, attnLoc, q, k, v,
                                                      /*scale=*/FloatAttr());
    Value o = mergeHeads(attnLoc, attention.getResult());
    x = train::AddOp::create(
        b, attnLoc, x,
        linear(attnLoc, o, h + "attn.c_proj.weight", h + "attn.c_proj.bias"));

    Location mlpLoc = nameLoc(h + "mlp");
    n = train::LayerNormOp::create(b, mlpLoc, x, param(h + "ln_2.weight"),
                                   param(h + "ln_2.bias"), eps);
    Value up = linear(mlpLoc, n, h + "mlp.c_fc.weight", h + "mlp.c_fc.bias");
    Value act = train::GeluOp::create(b, mlpLoc, up);
    x = train::AddOp::create(
        b, mlpLoc, x,
        linear(mlpLoc, act, h + "mlp.c_proj.weight", h + "mlp.c_proj.bias"));
  }
  x = train::LayerNormOp::create(b, nameLoc("ln_f"), x, param("ln_f.weight"),
                                 param("ln_f.bias"), eps);
  return outputLogits(x, "wte");
}

Value StepBuilder::forwardLlama(Value inputIds) {
  FloatAttr eps = b.getF32FloatAttr(config.normEps);
  FloatAttr theta = b.getF32FloatAttr(config.ropeTheta);
  Value x = train::EmbeddingOp::create(b, nameLoc("embedding"), inputIds,
                                       param("model.embed_tokens.weight"));
  for (int64_t i = 0; i < config.layers; ++i) {
    std::string l = "model.layers." + std::to_string(i) + ".";
    Location attnLoc = nameLoc(l + "self_attn");
    Value n = train::RmsNormOp::create(
        b, attnLoc, x, param(l + "input_layernorm.weight"), eps);
    Value q =
        splitHeads(attnLoc, linear(attnLoc, n, l + "self_attn.q_proj.weight"),
                   config.heads);
    Value k =
        splitHeads(attnLoc, linear(attnLoc, n, l + "self_attn.k_proj.weight"),
                   config.kvHeads);
    Value v =
        splitHeads(attnLoc, linear(attnLoc, n, l + "self_attn.v_proj.weight"),
                   config.kvHeads);
    q = train::RopeOp::create(b, attnLoc, q, theta);
    k = train::RopeOp::create(b, attnLoc, k, theta);
    auto attention = train::CausalAttentionOp::create(b, attnLoc, q, k, v,
                                                      /*scale=*/FloatAttr());
    Value o = mergeHeads(attnLoc, attention.getResult());
    x = train::AddOp::create(b, attnLoc, x,
                             linear(attnLoc, o, l + "self_attn.o_proj.weight"));

    Location mlpLoc = nameLoc(l + "mlp");
    n = train::RmsNormOp::create(
        b, mlpLoc, x, param(l + "post_attention_layernorm.weight"), eps);
    Value gate = linear(mlpLoc, n, l + "mlp.gate_proj.weight");
    Value up = linear(mlpLoc, n, l + "mlp.up_proj.weight");
    Value act = train::SwigluOp::create(b, mlpLoc, gate, up);
    x = train::AddOp::create(b, mlpLoc, x,
                             linear(mlpLoc, act, l + "mlp.down_proj.weight"));
  }
  x = train::RmsNormOp::create(b, nameLoc("model.norm"), x,
                               param("model.norm.weight"), eps);
  return outputLogits(x, "model.embed_tokens.weight");
}

Value StepBuilder::genericLinear(Location loc, Value input,
                                 const Twine &weight, const Twine &bias) {
  Value y = train::MatmulOp::create(b, loc, input, param(weight),
                                    /*transpose_lhs=*/false,
                                    /*transpose_rhs=*/true);
  if (bias.isTriviallyEmpty())
    return y;
  return train::AddOp::create(b, loc, y, param(bias));
}

Value StepBuilder::toHeads(Location loc, Value input, int64_t heads) {
  Value split = splitHeads(loc, input, heads);
  return train::TransposeOp::create(b, loc, split,
                                    ArrayRef<int64_t>{0, 2, 1, 3});
}

Value StepBuilder::fromHeads(Location loc, Value input) {
  Value t = train::TransposeOp::create(b, loc, input,
                                       ArrayRef<int64_t>{0, 2, 1, 3});
  return mergeHeads(loc, t);
}

Value StepBuilder::genericAttention(Location loc, Value q, Value k, Value v) {
  int64_t rows = config.batchRows(), t = config.seq, d = config.headDim();
  int64_t heads = config.heads, kvHeads = config.kvHeads;
  if (kvHeads != heads) {
    // repeat_kv: [B, KV, T, D] -> [B, KV, 1, T, D] -> [B, KV, rep, T, D]
    // -> [B, H, T, D].
    int64_t rep = heads / kvHeads;
    auto repeat = [&](Value x) {
      Value one = train::ReshapeOp::create(
          b, loc, computeTensor({rows, kvHeads, 1, t, d}), x);
      Value expanded = train::BroadcastToOp::create(
          b, loc, computeTensor({rows, kvHeads, rep, t, d}), one);
      return train::ReshapeOp::create(b, loc, computeTensor({rows, heads, t, d}),
                                      expanded)
          .getResult();
    };
    k = repeat(k);
    v = repeat(v);
  }
  Value scores = train::MatmulOp::create(b, loc, q, k, /*transpose_lhs=*/false,
                                         /*transpose_rhs=*/true);
  scores = train::ScaleOp::create(
      b, loc, scores, APFloat(static_cast<float>(1.0 / std::sqrt(double(d)))));
  // The causal mask, position i seeing positions j <= i: a constant.
  SmallVector<bool> allowed;
  allowed.reserve(t * t);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j)
      allowed.push_back(j <= i);
  auto maskType = RankedTensorType::get({t, t}, b.getI1Type());
  Value mask = train::ConstantOp::create(
      b, loc, DenseElementsAttr::get(maskType, ArrayRef<bool>(allowed)));
  Value masked = train::SelectOp::create(
      b, loc, mask, scores,
      scalarConstant(loc, -std::numeric_limits<float>::infinity()));
  Value probs = train::SoftmaxOp::create(b, loc, masked);
  return train::MatmulOp::create(b, loc, probs, v, false, false);
}

Value StepBuilder::genericGelu(Location loc, Value x) {
  Value cube = train::PowScalarOp::create(b, loc, x, APFloat(3.0f));
  Value inner = train::AddOp::create(
      b, loc, x, train::ScaleOp::create(b, loc, cube, APFloat(0.044715f)));
  Value scaled = train::ScaleOp::create(
      b, loc, inner, APFloat(static_cast<float>(std::sqrt(2.0 / M_PI))));
  Value onePlus = train::AddScalarOp::create(
      b, loc, train::TanhOp::create(b, loc, scaled), APFloat(1.0f));
  Value half = train::ScaleOp::create(b, loc, x, APFloat(0.5f));
  return train::MulOp::create(b, loc, half, onePlus);
}

Value StepBuilder::genericRmsNorm(Location loc, Value x, const Twine &weight) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t last = type.getRank() - 1;
  Value square = train::PowScalarOp::create(b, loc, x, APFloat(2.0f));
  Value variance = train::ReduceMeanOp::create(
      b, loc, square, ArrayRef<int64_t>{last}, /*keepdim=*/true);
  Value inverse = train::RsqrtOp::create(
      b, loc,
      train::AddScalarOp::create(
          b, loc, variance, APFloat(static_cast<float>(config.normEps))));
  Value normed = train::MulOp::create(b, loc, x, inverse);
  return train::MulOp::create(b, loc, param(weight), normed);
}

Value StepBuilder::genericRope(Location loc, Value x) {
  // cos and sin of t * theta^(-2i/D) for each position t and pair i, laid
  // out [T, D] with each half repeated (the front end's folded tables).
  int64_t t = config.seq, d = config.headDim(), half = d / 2;
  SmallVector<float> cosTable(t * d), sinTable(t * d);
  for (int64_t i = 0; i < half; ++i) {
    double invFreq = std::pow(config.ropeTheta, -2.0 * double(i) / double(d));
    for (int64_t pos = 0; pos < t; ++pos) {
      double angle = double(pos) * invFreq;
      for (int64_t j : {i, i + half}) {
        cosTable[pos * d + j] = static_cast<float>(std::cos(angle));
        sinTable[pos * d + j] = static_cast<float>(std::sin(angle));
      }
    }
  }
  auto tableType = RankedTensorType::get({t, d}, b.getF32Type());
  auto table = [&](ArrayRef<float> values) {
    Value c = train::ConstantOp::create(
        b, loc, DenseElementsAttr::get(tableType, values));
    if (computeType != b.getF32Type())
      c = train::CastOp::create(b, loc, computeTensor({t, d}), c);
    return c;
  };
  Value cos = table(cosTable), sin = table(sinTable);
  // rotate_half(x) = cat(-x[..., half:], x[..., :half]).
  auto shape = cast<RankedTensorType>(x.getType()).getShape();
  int64_t last = shape.size() - 1;
  Value lo = train::SliceOp::create(b, loc, x, last, 0, half);
  Value hi = train::SliceOp::create(b, loc, x, last, half, d);
  Value rotated = train::ConcatOp::create(
      b, loc, ValueRange{train::NegOp::create(b, loc, hi), lo}, last);
  return train::AddOp::create(b, loc, train::MulOp::create(b, loc, x, cos),
                              train::MulOp::create(b, loc, rotated, sin));
}

Value StepBuilder::genericForwardGpt2(Value inputIds) {
  FloatAttr eps = b.getF32FloatAttr(config.normEps);
  Location embedLoc = nameLoc("embedding");
  Value x = train::EmbeddingOp::create(b, embedLoc, inputIds, param("wte"));
  // wpe(arange(T)): the position ids are a constant.
  SmallVector<int32_t> positions(config.seq);
  for (int64_t i = 0; i < config.seq; ++i)
    positions[i] = static_cast<int32_t>(i);
  Value ids = train::ConstantOp::create(
      b, embedLoc,
      DenseElementsAttr::get(
          RankedTensorType::get({config.seq}, b.getI32Type()),
          ArrayRef<int32_t>(positions)));
  Value pos = train::EmbeddingOp::create(b, embedLoc, ids, param("wpe"));
  x = train::AddOp::create(b, embedLoc, x, pos);
  for (int64_t i = 0; i < config.layers; ++i) {
    std::string h = "h." + std::to_string(i) + ".";
    Location attnLoc = nameLoc(h + "attn");
    Value n = train::LayerNormOp::create(
        b, attnLoc, x, param(h + "ln_1.weight"), param(h + "ln_1.bias"), eps);
    auto project = [&](StringRef proj) {
      std::string prefix = h + "attn." + proj.str();
      return toHeads(attnLoc,
                     genericLinear(attnLoc, n, prefix + ".weight",
                                   prefix + ".bias"),
                     config.heads);
    };
    Value q = project("q_proj"), k = project("k_proj"), v = project("v_proj");
    Value o = fromHeads(attnLoc, genericAttention(attnLoc, q, k, v));
    x = train::AddOp::create(b, attnLoc, x,
                             genericLinear(attnLoc, o, h + "attn.c_proj.weight",
                                           h + "attn.c_proj.bias"));

    Location mlpLoc = nameLoc(h + "mlp");
    n = train::LayerNormOp::create(b, mlpLoc, x, param(h + "ln_2.weight"),
                                   param(h + "ln_2.bias"), eps);
    Value up = genericLinear(mlpLoc, n, h + "mlp.c_fc.weight",
                             h + "mlp.c_fc.bias");
    x = train::AddOp::create(
        b, mlpLoc, x,
        genericLinear(mlpLoc, genericGelu(mlpLoc, up), h + "mlp.c_proj.weight",
                      h + "mlp.c_proj.bias"));
  }
  x = train::LayerNormOp::create(b, nameLoc("ln_f"), x, param("ln_f.weight"),
                                 param("ln_f.bias"), eps);
  StringRef weight = config.tieEmbeddings ? "wte" : "lm_head.weight";
  return genericLinear(nameLoc("lm_head"), x, weight);
}

Value StepBuilder::genericForwardLlama(Value inputIds) {
  Value x = train::EmbeddingOp::create(b, nameLoc("embedding"), inputIds,
                                       param("model.embed_tokens.weight"));
  for (int64_t i = 0; i < config.layers; ++i) {
    std::string l = "model.layers." + std::to_string(i) + ".";
    Location attnLoc = nameLoc(l + "self_attn");
    Value n = genericRmsNorm(attnLoc, x, l + "input_layernorm.weight");
    auto project = [&](StringRef proj, int64_t heads) {
      return toHeads(
          attnLoc,
          genericLinear(attnLoc, n, l + "self_attn." + proj + ".weight"),
          heads);
    };
    Value q = genericRope(attnLoc, project("q_proj", config.heads));
    Value k = genericRope(attnLoc, project("k_proj", config.kvHeads));
    Value v = project("v_proj", config.kvHeads);
    Value o = fromHeads(attnLoc, genericAttention(attnLoc, q, k, v));
    x = train::AddOp::create(
        b, attnLoc, x,
        genericLinear(attnLoc, o, l + "self_attn.o_proj.weight"));

    Location mlpLoc = nameLoc(l + "mlp");
    n = genericRmsNorm(mlpLoc, x, l + "post_attention_layernorm.weight");
    Value gate = genericLinear(mlpLoc, n, l + "mlp.gate_proj.weight");
    Value up = genericLinear(mlpLoc, n, l + "mlp.up_proj.weight");
    Value act = train::MulOp::create(b, mlpLoc,
                                     train::SiluOp::create(b, mlpLoc, gate), up);
    x = train::AddOp::create(
        b, mlpLoc, x, genericLinear(mlpLoc, act, l + "mlp.down_proj.weight"));
  }
  x = genericRmsNorm(nameLoc("model.norm"), x, "model.norm.weight");
  StringRef weight =
      config.tieEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  return genericLinear(nameLoc("lm_head"), x, weight);
}

Attribute StepBuilder::optimizerAttr() const {
  auto f64 = [&](double value) {
    return FloatAttr::get(Float64Type::get(ctx), value);
  };
  if (config.optimizer == OptimizerKind::AdamW)
    return train::AdamwConfigAttr::get(ctx, f64(config.lr), f64(config.beta1),
                                       f64(config.beta2), f64(config.eps),
                                       f64(config.weightDecay));
  return train::SgdConfigAttr::get(ctx, f64(config.lr), f64(config.momentum),
                                   f64(config.weightDecay));
}

/// The `train.role`/`train.name`[/`train.init`][/`train.unit`] dictionary
/// of a step value.
DictionaryAttr stepValueAttrs(Builder &b, train::Role role, StringRef name,
                              train::InitAttr init = {}, StringRef unit = {}) {
  MLIRContext *ctx = b.getContext();
  SmallVector<NamedAttribute, 4> attrs = {
      b.getNamedAttr(train::TrainDialect::kRoleAttrName,
                     train::RoleAttr::get(ctx, role)),
      b.getNamedAttr(train::TrainDialect::kNameAttrName,
                     b.getStringAttr(name))};
  if (init)
    attrs.push_back(b.getNamedAttr(train::TrainDialect::kInitAttrName, init));
  if (!unit.empty())
    attrs.push_back(b.getNamedAttr(train::TrainDialect::kUnitAttrName,
                                   b.getStringAttr(unit)));
  return b.getDictionaryAttr(attrs);
}

OwningOpRef<ModuleOp> StepBuilder::build() {
  if (config.family == ModelFamily::GPT2)
    declareGpt2();
  else
    declareLlama();

  // Parameters are f32 master weights whatever the compute precision.
  Type f32 = b.getF32Type();
  auto batchType =
      RankedTensorType::get({config.batchRows(), config.seq}, b.getI32Type());
  SmallVector<Type> argTypes;
  SmallVector<Attribute> argAttrs;
  for (const Parameter &p : parameters) {
    argTypes.push_back(RankedTensorType::get(p.shape, f32));
    argAttrs.push_back(
        stepValueAttrs(b, train::Role::Param, p.name, p.init, p.unit));
  }
  argTypes.append({batchType, batchType});
  argAttrs.push_back(stepValueAttrs(b, train::Role::Input, "input_ids"));
  argAttrs.push_back(stepValueAttrs(b, train::Role::Label, "labels"));
  Type lossType = RankedTensorType::get({}, f32);

  Location loc = nameLoc(config.name);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto step = func::FuncOp::create(b, loc, "train_step",
                                   b.getFunctionType(argTypes, lossType));
  step.setAllArgAttrs(argAttrs);
  step.setResultAttrs(0, stepValueAttrs(b, train::Role::Loss, "loss"));
  step->setAttr(train::TrainDialect::kStepAttrName, b.getUnitAttr());
  step->setAttr(train::TrainDialect::kOptimizerAttrName, optimizerAttr());
  if (config.maxGradNorm > 0.0)
    step->setAttr(train::TrainDialect::kMaxGradNormAttrName,
                  b.getF32FloatAttr(config.maxGradNorm));
  if (config.gradAccum > 1)
    step->setAttr(train::TrainDialect::kMicroBatchesAttrName,
                  b.getI64IntegerAttr(config.gradAccum));

  Block *body = step.addEntryBlock();
  b.setInsertionPointToStart(body);
  for (auto [p, arg] : llvm::zip(parameters, body->getArguments())) {
    Value value = arg;
    // One cast per parameter, at the top: autodiff then sums the bf16
    // gradients of every use before the single cast back, and hands AdamW
    // the bf16 gradient.
    if (config.precision == Precision::BF16)
      value = train::CastOp::create(
          b, nameLoc(p.name), RankedTensorType::get(p.shape, computeType), arg);
    values[p.name] = value;
  }
  Value inputIds = body->getArgument(parameters.size());
  Value labels = body->getArgument(parameters.size() + 1);

  Value logits;
  if (config.generic)
    logits = config.family == ModelFamily::GPT2
                 ? genericForwardGpt2(inputIds)
                 : genericForwardLlama(inputIds);
  else
    logits = config.family == ModelFamily::GPT2 ? forwardGpt2(inputIds)
                                                : forwardLlama(inputIds);
  // An f32 scalar also for bf16 logits.
  Value loss =
      train::SoftmaxCrossEntropyOp::create(b, nameLoc("loss"), logits, labels,
                                           /*ignore_index=*/IntegerAttr());
  func::ReturnOp::create(b, loc, loss);
  return module;
}

} // namespace

FailureOr<OwningOpRef<ModuleOp>>
autoshard::models::buildTrainingStep(MLIRContext *context,
                                     const ModelConfig &config) {
  if (llvm::Error error = verifyModelConfig(config)) {
    emitError(UnknownLoc::get(context))
        << "invalid model config '" << config.name
        << "': " << llvm::toString(std::move(error));
    return failure();
  }
  context->getOrLoadDialect<train::TrainDialect>();
  context->getOrLoadDialect<func::FuncDialect>();
  OwningOpRef<ModuleOp> module = StepBuilder(context, config).build();
  // A config that passes verifyModelConfig must give valid IR; a failure
  // here is a bug in the builder, reported by the verifier's diagnostic.
  if (failed(verify(*module)))
    return failure();
  return module;
}

int64_t autoshard::models::countParameterArguments(FunctionOpInterface step) {
  train::StepSignature signature(step);
  int64_t total = 0;
  for (const train::StepValue &arg : signature.getArgs())
    if (arg.role == train::Role::Param)
      total += arg.type.getNumElements();
  return total;
}
